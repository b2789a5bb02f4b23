"""The static audit classifies a table of small fixture classes, by import and by file, identically."""

from __future__ import annotations

import ast
import textwrap

import pytest
from audit_helpers import FIXTURES, load_fixture

from ragleak.audit import AuditError, StubHookError, inventory_class, inventory_file, inventory_of
from ragleak.audit.astflow import classify_body
from ragleak.defenses.base import Defense
from ragleak.records import HOOK_NAMES

TABLE = FIXTURES / "hook_table.py"

# (class, hook, status, form, defined_in): every hook a fixture overrides or inherits from a fixture.
EXPECTED = [
    # pass-through, in each listed form
    ("ReturnsCandidates", "score_retrieval", "inactive", "returns-argument", "ReturnsCandidates"),
    ("ReturnsListCopy", "rewrite_context", "inactive", "returns-argument", "ReturnsListCopy"),
    ("ReturnsSliceCopy", "score_retrieval", "inactive", "returns-argument", "ReturnsSliceCopy"),
    ("ReturnsAlias", "postprocess", "inactive", "returns-argument", "ReturnsAlias"),
    ("ReturnsComprehensionCopy", "rewrite_context", "inactive", "returns-argument", "ReturnsComprehensionCopy"),
    ("PassBody", "postprocess", "inactive", "pass", "PassBody"),
    ("EllipsisBody", "rewrite_context", "inactive", "ellipsis", "EllipsisBody"),
    ("DocstringOnly", "postprocess", "inactive", "docstring-only", "DocstringOnly"),
    ("RaisesNotImplemented", "generate", "inactive", "not-implemented", "RaisesNotImplemented"),
    ("TodoCommentInBody", "generate", "inactive", "stub-comment", "TodoCommentInBody"),
    ("FixmeCommentAbove", "score_retrieval", "inactive", "stub-comment", "FixmeCommentAbove"),
    ("PlaceholderComment", "rewrite_context", "inactive", "stub-comment", "PlaceholderComment"),
    ("PlainGeneration", "generate", "inactive", "plain-generation", "PlainGeneration"),
    ("PlainGenerationAlias", "generate", "inactive", "plain-generation", "PlainGenerationAlias"),
    ("DelegatesToBase", "postprocess", "inactive", "returns-argument", "DelegatesToBase"),
    ("LogsThenPassesOn", "postprocess", "inactive", "returns-argument", "LogsThenPassesOn"),
    ("SpendsBudgetOnly", "generate", "inactive", "plain-generation", "SpendsBudgetOnly"),
    # re-orderings keep every passage and score: not a content change
    ("SortsInPlace", "score_retrieval", "inactive", "order-only", "SortsInPlace"),
    ("ShufflesInPlace", "score_retrieval", "inactive", "order-only", "ShufflesInPlace"),
    # pattern-limited
    ("RegexMask", "postprocess", "pattern-limited", None, "RegexMask"),
    ("RegexGuardedRefusal", "postprocess", "pattern-limited", None, "RegexGuardedRefusal"),
    ("RegexEarlyExit", "postprocess", "pattern-limited", None, "RegexEarlyExit"),
    ("PatternLoop", "postprocess", "pattern-limited", None, "PatternLoop"),
    ("RegexHelper", "rewrite_context", "pattern-limited", None, "RegexHelper"),
    ("LiteralReplace", "postprocess", "pattern-limited", None, "LiteralReplace"),
    ("RegexFilter", "rewrite_context", "pattern-limited", None, "RegexFilter"),
    ("MatchStatement", "postprocess", "pattern-limited", None, "MatchStatement"),
    # active
    ("NoisyScores", "score_retrieval", "active", None, "NoisyScores"),
    ("DropsLowest", "score_retrieval", "active", None, "DropsLowest"),
    ("ChangesMessages", "generate", "active", None, "ChangesMessages"),
    ("ChangesDecoding", "generate", "active", None, "ChangesDecoding"),
    ("AlwaysRefuses", "postprocess", "active", None, "AlwaysRefuses"),
    ("NoiseThenRegexFilter", "score_retrieval", "active", None, "NoiseThenRegexFilter"),
    ("FlagGuardedNoise", "score_retrieval", "active", None, "FlagGuardedNoise"),
    # inherited
    ("InheritsActive", "score_retrieval", "active", None, "NoisyScores"),
    ("InheritsStub", "generate", "inactive", "plain-generation", "PlainGeneration"),
    ("DelegatesToActive", "score_retrieval", "active", None, "DelegatesToActive"),
    ("DeclaredButMissing", "postprocess", "not-overridden", None, "Defense"),
]
ALL_NOT_OVERRIDDEN = ["OverridesNothing"]


@pytest.fixture(scope="module")
def table_module():
    return load_fixture("hook_table")


@pytest.fixture(scope="module")
def by_file():
    return {inv.cls: inv for inv in inventory_file(TABLE)}


def test_the_table_is_large_enough_and_covers_every_fixture(table_module):
    assert len(EXPECTED) >= 20
    classes = {n for n, v in vars(table_module).items()
               if isinstance(v, type) and issubclass(v, Defense) and v is not Defense}
    assert classes == {row[0] for row in EXPECTED} | set(ALL_NOT_OVERRIDDEN)
    forms = {row[3] for row in EXPECTED if row[2] == "inactive"}
    assert {"returns-argument", "pass", "ellipsis", "not-implemented", "stub-comment"} <= forms


@pytest.mark.parametrize("cls_name, hook, status, form, defined_in", EXPECTED, ids=[f"{r[0]}.{r[1]}" for r in EXPECTED])
def test_import_route_classifies(table_module, cls_name, hook, status, form, defined_in):
    finding = inventory_class(getattr(table_module, cls_name)).finding(hook)
    assert (finding.status, finding.form, finding.defined_in) == (status, form, defined_in), finding.evidence


@pytest.mark.parametrize("cls_name, hook, status, form, defined_in", EXPECTED, ids=[f"{r[0]}.{r[1]}" for r in EXPECTED])
def test_file_route_classifies_the_same(by_file, cls_name, hook, status, form, defined_in):
    finding = by_file[cls_name].finding(hook)
    assert (finding.status, finding.form, finding.defined_in) == (status, form, defined_in), finding.evidence


def test_every_other_hook_is_not_overridden(table_module, by_file):
    listed = {(r[0], r[1]) for r in EXPECTED}
    for inv in by_file.values():
        imported = inventory_class(getattr(table_module, inv.cls))
        for f in inv.findings:
            if (inv.cls, f.hook) not in listed:
                assert f.status == "not-overridden", (inv.cls, f.hook, f.evidence)
                assert imported.finding(f.hook).status == "not-overridden"


def test_findings_carry_a_source_location_and_evidence(by_file):
    lines = TABLE.read_text().splitlines()
    stub = by_file["ReturnsCandidates"].finding("score_retrieval")
    path, line = stub.location.rsplit(":", 1)
    assert path.endswith("hook_table.py")
    assert lines[int(line) - 1].strip() == "return candidates"
    assert "return candidates" in stub.evidence
    todo = by_file["TodoCommentInBody"].finding("generate")
    assert "TODO" in lines[int(todo.location.rsplit(":", 1)[1]) - 1]
    inherited = by_file["InheritsActive"].finding("score_retrieval")
    assert "inherited from NoisyScores" in inherited.evidence


def test_problems_are_pass_throughs_and_declared_but_missing_hooks(by_file):
    assert [f.hook for f in by_file["ReturnsCandidates"].problems] == ["score_retrieval"]
    assert [f.hook for f in by_file["DeclaredButMissing"].problems] == ["postprocess"]
    assert by_file["NoisyScores"].problems == []
    assert by_file["RegexMask"].problems == []
    assert by_file["OverridesNothing"].problems == []


def test_strict_raises_on_a_stub_and_not_on_an_active_class(table_module):
    with pytest.raises(StubHookError, match="score_retrieval is inactive"):
        inventory_class(table_module.ReturnsCandidates, strict=True)
    with pytest.raises(StubHookError, match="declared in `hooks` but not implemented"):
        inventory_class(table_module.DeclaredButMissing, strict=True)
    assert inventory_class(table_module.NoisyScores, strict=True).active_hooks == ["score_retrieval"]
    with pytest.raises(StubHookError):
        inventory_file(TABLE, strict=True)


def test_declared_hooks_and_names_are_read_from_the_source(by_file, table_module):
    assert by_file["InheritsStub"].declared_hooks == ["generate"]
    assert by_file["InheritsActive"].declared_hooks == ["score_retrieval"]  # inherited `hooks`
    assert by_file["PassBody"].defense == "PassBody"  # no `name`: the class name, not the base's "none"
    assert inventory_class(table_module.InheritsStub).declared_hooks == ["generate"]


def _verdict(src: str, hook: str):
    func = ast.parse(textwrap.dedent(src)).body[0]
    return classify_body(func, hook, frozenset(), {})


def test_a_stub_word_inside_a_string_is_not_a_comment(tmp_path):
    path = tmp_path / "strings.py"
    path.write_text(textwrap.dedent('''
        from ragleak.defenses import Defense

        class Refuser(Defense):
            hooks = frozenset({"postprocess"})

            def postprocess(self, query, answer, passages):
                return "TODO # FIXME: this is the refusal text, not a comment"
    '''))
    (inv,) = inventory_file(path)
    assert inv.finding("postprocess").status == "active"


def test_renamed_parameters_and_reassignment_are_followed():
    assert _verdict("""
        def score_retrieval(self, q, cands):
            cands = list(cands)
            return cands
    """, "score_retrieval").status == "inactive"
    assert _verdict("""
        def postprocess(self, q, text, ps):
            text = text.upper()
            return text
    """, "postprocess").status == "active"
    # returning another argument is a change, not a pass-through
    assert _verdict("""
        def postprocess(self, query, answer, passages):
            return query
    """, "postprocess").status == "active"


def test_registered_name_route_and_errors(tmp_path):
    (inv,) = inventory_of("none")
    assert inv.cls == "Defense" and all(f.status == "not-overridden" for f in inv.findings)
    with pytest.raises(AuditError):
        inventory_of("no-such-defense")
    with pytest.raises(AuditError, match="no such file"):
        inventory_of(tmp_path / "missing.py")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(AuditError, match="no Defense subclass"):
        inventory_of(empty)
    broken = tmp_path / "broken.py"
    broken.write_text("class X(:\n")
    with pytest.raises(AuditError, match="cannot parse"):
        inventory_of(broken)
    with pytest.raises(AuditError, match="not a subclass"):
        inventory_class(int)


def test_a_file_defense_can_subclass_a_package_defense(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent('''
        from audit_fixture_hook_table import NoisyScores

        class Mine(NoisyScores):
            name = "mine"
            def postprocess(self, query, answer, passages):
                return answer
    '''))
    load_fixture("hook_table")
    (inv,) = inventory_file(path)
    assert inv.defense == "mine" and inv.declared_hooks == ["score_retrieval"]
    assert inv.finding("score_retrieval").status == "active"
    assert inv.finding("postprocess").status == "inactive"
    assert len(HOOK_NAMES) == len(inv.findings)


def test_docstring_stub_markers_and_assigned_hooks(tmp_path):
    path = tmp_path / "odd.py"
    path.write_text(textwrap.dedent('''
        from ragleak.defenses import Defense

        def _upper(self, query, answer, passages):
            return answer.upper()

        class Admits(Defense):
            def postprocess(self, query, answer, passages):
                """Mask names. Not implemented yet: returns the answer upper-cased."""
                return answer.upper()

        class Assigned(Defense):
            hooks = frozenset({"postprocess"})
            postprocess = _upper
    '''))
    invs = {i.cls: i for i in inventory_file(path)}
    admits = invs["Admits"].finding("postprocess")
    assert (admits.status, admits.form) == ("inactive", "stub-comment") and "docstring" in admits.evidence
    assigned = invs["Assigned"].finding("postprocess")
    # a hook bound to a module function is analysed as that function
    assert assigned.status == "active" and "upper()" in assigned.evidence


def test_only_defense_classes_are_audited_in_a_file(tmp_path):
    path = tmp_path / "mixed.py"
    path.write_text(textwrap.dedent('''
        from ragleak.defenses import Defense
        from somewhere_else import BaseGenerator, ThirdPartyDefense

        class MyGenerator(BaseGenerator):
            def generate(self, messages, params=None):
                return messages

        class Helper:
            def postprocess(self, query, answer, passages):
                return answer

        class Theirs(ThirdPartyDefense):
            hooks = frozenset({"postprocess"})
            def postprocess(self, query, answer, passages):
                return answer

        class Ours(Defense):
            hooks = frozenset({"postprocess"})
            def postprocess(self, query, answer, passages):
                return answer.lower()
    '''))
    invs = {i.cls: i for i in inventory_file(path)}
    assert set(invs) == {"Theirs", "Ours"}
    assert invs["Theirs"].finding("postprocess").status == "inactive"
    assert invs["Ours"].finding("postprocess").status == "active"
