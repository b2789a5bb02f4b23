"""The audit interpreter's building blocks tested directly: the fact kinds (``Kind``), the join of
abstract values and states, and loops run to a fixpoint (issue 36)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.audit import absval, astflow
from ragleak.audit.absval import (
    MAX_LOOP_ROUNDS,
    MIN_LOOP_ROUNDS,
    Fact,
    Kind,
    classify,
    join_envs,
    kinds,
    loop_exit,
    loop_fixpoint,
    loop_head,
    one,
    union,
    widen,
)
from ragleak.audit.astflow import analyse_function
from ragleak.audit.astinterp import Interpreter
from ragleak.audit.source import load_module

AUDIT_SRC = Path(absval.__file__).parent

# ------------------------------------------------------------------------------ helpers


def _module(tmp_path: Path, src: str, name: str = "hooks_under_test.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(src), encoding="utf-8")
    return load_module(path)


def verdict(tmp_path: Path, body: str, hook: str = "rewrite_context"):
    """The static verdict of a free ``hook`` function (``self`` first) defined by ``body``."""
    module = _module(tmp_path, body)
    return analyse_function(module, module.functions[hook], hook)


class Recording(Interpreter):
    """The interpreter, noting the kind of every value it evaluates."""

    seen: set[Kind] = set()

    def eval(self, node, frame):
        value = super().eval(node, frame)
        Recording.seen |= kinds(value)
        return value


# ------------------------------------------------------------------------------ Kind

#: One small function per kind whose analysis evaluates a value of that kind: (hook, source).
KIND_CORPUS = '''
import logging
import random
import re

PATTERN = re.compile(r"[0-9]+")


def helper(x):
    return x


class Box:
    def get(self):
        return 1


def k_flow(self, query, passages):
    return passages

def k_elem(self, query, passages):
    return passages[0]

def k_field(self, query, passages):
    return passages[0].text

def k_column(self, query, passages):
    return [p.text for p in passages]

def k_parts(self, query, answer, passages):
    return answer.split()

def k_part(self, query, answer, passages):
    return answer.split()[0]

def k_plain(self, messages, context, generator):
    return generator.generate(messages)

def k_ctxs(self, query, answer, passages):
    return " ".join(p.text for p in passages)

def k_const(self, query, passages):
    return []

def k_new(self, query, answer, passages):
    return answer.upper()

def k_pat(self, query, answer, passages):
    return PATTERN.sub("#", answer)

def k_rand(self, query, passages):
    return random.Random(0).random()

def k_unk(self, query, passages):
    return not_in_this_module(passages)

def k_other(self, query, passages):
    return len(passages)

def k_match(self, query, answer, passages):
    return PATTERN.search(answer)

def k_regex(self, query, passages):
    return PATTERN

def k_remod(self, query, answer, passages):
    rewrite = re.sub
    return rewrite("a", "b", answer)

def k_rng(self, query, passages):
    return random.Random(0)

def k_self(self, query, passages):
    return self

def k_gen(self, messages, context, generator):
    return generator

def k_inst(self, query, passages):
    return Box()

def k_class(self, query, passages):
    return Box

def k_func(self, query, passages):
    return helper

def k_lambda(self, query, passages):
    return lambda x: x

def k_module(self, query, passages):
    return re

def k_logger(self, query, passages):
    return logging.info

def k_tuple(self, query, passages):
    return (passages, query)

def k_enum(self, query, passages):
    return enumerate(passages)

def k_zip(self, query, passages):
    return zip(passages, passages)
'''

HOOK_OF_ARGS = {("self", "query", "passages"): "rewrite_context",
                ("self", "query", "answer", "passages"): "postprocess",
                ("self", "messages", "context", "generator"): "generate"}


def test_the_kind_corpus_covers_every_kind(tmp_path):
    module = _module(tmp_path, KIND_CORPUS)
    assert {name.removeprefix("k_").upper() for name in module.functions if name.startswith("k_")} == \
        {k.value for k in Kind}


@pytest.mark.parametrize("kind", list(Kind), ids=lambda k: k.value)
def test_every_kind_is_reachable(kind, tmp_path, monkeypatch):
    module = _module(tmp_path, KIND_CORPUS)
    func = module.functions[f"k_{kind.value.lower()}"]
    hook = HOOK_OF_ARGS[tuple(a.arg for a in func.args.args)]
    monkeypatch.setattr(astflow, "Interpreter", Recording)
    monkeypatch.setattr(Recording, "seen", set())
    analyse_function(module, func, hook)
    assert kind in Recording.seen
    assert all(isinstance(k, Kind) for k in Recording.seen)


def test_a_fact_holds_a_kind_and_refuses_an_unknown_one():
    assert Fact("FLOW", flow="in").kind is Kind.FLOW
    assert Fact(Kind.FLOW, flow="in") == Fact("FLOW", flow="in")
    with pytest.raises(ValueError):
        Fact("FLOWS")


@pytest.mark.parametrize("name", ["absval.py", "astinterp.py", "astcalls.py", "astflow.py"])
def test_no_kind_is_spelt_as_a_bare_string(name):
    """Kinds are produced and compared as ``Kind`` members, never as string literals."""
    tree = ast.parse((AUDIT_SRC / name).read_text(encoding="utf-8"))
    in_enum = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == "Kind"
               for n in ast.walk(c)}
    spelt = [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
             and isinstance(n.value, str) and n.value in Kind.__members__ and id(n) not in in_enum]
    assert not spelt


# ------------------------------------------------------------------------------ the join

FLOWS = ("", "in", "ctx")
facts = st.builds(Fact, kind=st.sampled_from(list(Kind)), flow=st.sampled_from(FLOWS),
                  value=st.sampled_from([None, 0, "", "x", ()]))
values = st.frozensets(facts, max_size=4)
envs = st.dictionaries(st.sampled_from("abcd"), values, max_size=4)

#: The verdict classes of ``classify``, least to most severe.
CHAIN = ("same", "unknown", "pattern", "changed", "ctx")


def leq(a: dict, b: dict) -> bool:
    """``a`` below ``b``: every name of ``a`` bound in ``b`` to a superset."""
    return all(k in b and a[k] <= b[k] for k in a)


@settings(max_examples=200, deadline=None)
@given(values, values, values)
def test_union_is_a_join(a, b, c):
    assert union(a, b) == union(b, a)
    assert union(a, a) == a
    assert union(union(a, b), c) == union(a, union(b, c))
    assert union(a, frozenset()) == a
    assert a <= union(a, b) and b <= union(a, b)


@settings(max_examples=200, deadline=None)
@given(envs, envs, envs)
def test_join_envs_is_commutative_idempotent_and_associative(a, b, c):
    assert join_envs(a, b) == join_envs(b, a)
    assert join_envs(a, a) == a
    assert join_envs(join_envs(a, b), c) == join_envs(a, join_envs(b, c)) == join_envs(a, b, c)
    assert join_envs(a) == a and join_envs() == {}


@settings(max_examples=200, deadline=None)
@given(envs, envs, envs)
def test_join_envs_is_the_least_upper_bound_and_monotone(a, b, extra):
    joined = join_envs(a, b)
    assert leq(a, joined) and leq(b, joined)
    assert set(joined) == set(a) | set(b)  # a name bound on one side keeps that side's value
    bigger = join_envs(a, extra)
    assert leq(a, bigger) and leq(joined, join_envs(bigger, b))


@settings(max_examples=300, deadline=None)
@given(values, values, st.sampled_from(["rewrite_context", "generate", "postprocess", "score_retrieval"]))
def test_classify_maps_the_join_to_the_worse_class(a, b, hook):
    """classify is monotone: joining alternatives never makes a value look less changed, and
    the class of a join is the worse of the two classes."""
    ca, cb, cj = (CHAIN.index(classify(v, hook)[0]) for v in (a, b, union(a, b)))
    assert cj == max(ca, cb)


def test_unchanged_joined_with_changed_on_two_branches_may_change():
    same = {"out": one(Kind.FLOW, flow="in", alias=True)}
    changed = {"out": one(Kind.NEW, note="a new list")}
    assert classify(same["out"], "rewrite_context")[0] == "same"
    for joined in (join_envs(same, changed), join_envs(changed, same)):
        assert classify(joined["out"], "rewrite_context")[0] == "changed"
    assert classify(join_envs(same, same)["out"], "rewrite_context")[0] == "same"


def test_a_pattern_change_joined_with_the_input_is_pattern_limited():
    same = {"out": one(Kind.FLOW, flow="in")}
    masked = {"out": one(Kind.PAT, name="EMAIL")}
    assert classify(join_envs(same, masked)["out"], "postprocess") == ("pattern", Fact(Kind.PAT, name="EMAIL"))


def test_retrieved_text_is_worse_than_a_change_for_text_hooks():
    value = union(one(Kind.NEW), one(Kind.CTXS, note="passage text"))
    assert classify(value, "postprocess")[0] == "ctx"
    assert classify(value, "rewrite_context")[0] == "changed"


@pytest.mark.parametrize("branches, expected", [
    (("out = passages", "out = passages[:]"), "inactive"),
    (("out = passages", "out = []"), "active"),
    (("out = []", "out = passages"), "active"),
    (("out = passages", "out = PATTERN_RE.sub('', passages)"), "pattern-limited"),
])
def test_if_else_branches_are_joined(tmp_path, branches, expected):
    body, orelse = branches
    v = verdict(tmp_path, f"""
        import re
        PATTERN_RE = re.compile("x")
        def rewrite_context(self, query, passages):
            if query:
                {body}
            else:
                {orelse}
            return out
        """)
    assert v.status == expected, v.evidence


def test_try_except_states_are_joined(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            out = passages
            try:
                query.encode()
            except ValueError:
                out = []
            return out
        """)
    assert v.status == "active"


# ------------------------------------------------------------------------------ loops: the blocks


def _chain_pass(head):
    """``c = b; b = a; a = <new>``: what ``a`` gets reaches ``c`` on the third pass only."""
    return [{"a": one(Kind.NEW, note="new"), "b": head["a"], "c": head["b"]}], []


PRE = {"a": one(Kind.FLOW, flow="in"), "b": one(Kind.FLOW, flow="in"), "c": one(Kind.FLOW, flow="in")}


def test_a_value_rebound_in_the_body_reaches_a_fixpoint():
    states = loop_fixpoint(_chain_pass, PRE)
    assert not states.unsettled
    exit_ = loop_exit(PRE, states.ends, full=False)
    assert Fact(Kind.NEW, note="new") in exit_["c"]  # three passes deep: two passes do not see it
    assert loop_head(PRE, states.ends) == exit_
    again, _ = _chain_pass(exit_)  # one more pass adds nothing: a fixpoint
    assert leq(again[0], exit_)


def test_a_body_that_changes_nothing_settles_after_the_minimum_passes():
    calls = []

    def idle(head):
        calls.append(head)
        return [dict(head)], []

    states = loop_fixpoint(idle, PRE)
    assert states.rounds == len(calls) == MIN_LOOP_ROUNDS and not states.unsettled
    assert loop_exit(PRE, states.ends, full=False) == PRE
    assert loop_exit(PRE, states.ends, full=True) == PRE


def test_a_value_growing_without_end_is_reported_and_widened():
    def nest(head):
        return [{"acc": one(Kind.TUPLE, items=(head["acc"],)), "n": head["n"]}], []

    pre = {"acc": one(Kind.CONST, value=()), "n": one(Kind.OTHER)}
    states = loop_fixpoint(nest, pre)
    assert states.rounds == MAX_LOOP_ROUNDS and states.unsettled == {"acc"}
    widened = widen(loop_exit(pre, states.ends, full=False), states.unsettled, "grows", "f.py:3")
    assert Kind.UNK in kinds(widened["acc"]) and widened["n"] == pre["n"]


def test_loop_exit_keeps_the_no_pass_state_unless_the_loop_visits_every_element():
    rebuilt = {"out": one(Kind.FLOW, flow="in", note="rebuilt element by element")}
    pre = {"out": one(Kind.CONST, value=())}
    assert loop_exit(pre, [rebuilt], full=False) == join_envs(pre, rebuilt)
    assert loop_exit(pre, [rebuilt], full=True) == rebuilt
    assert loop_exit(pre, [], full=True) == pre  # no pass ends normally: only zero passes leave it


def test_breaks_are_collected_apart_from_the_ends():
    def stop(head):
        return [], [{"x": one(Kind.NEW)}]

    states = loop_fixpoint(stop, {"x": one(Kind.FLOW, flow="in")})
    assert states.ends == () and states.breaks and all(b == {"x": one(Kind.NEW)} for b in states.breaks)


# ------------------------------------------------------------------------------ loops: through the interpreter


@pytest.mark.parametrize("header, body", [
    ("for _ in range(3):", "passages = []"),
    ("for p in list(passages):", "passages = passages[1:]"),
    ("while len(passages) > 3:", "passages = passages[:-1]"),
    ("while query:", "passages = [p for p in passages if p.score > 0.5]"),
])
def test_a_loop_that_reassigns_the_input_is_not_a_pass_through(tmp_path, header, body):
    v = verdict(tmp_path, f"""
        def rewrite_context(self, query, passages):
            {header}
                {body}
            return passages
        """)
    assert v.status == "active", v.evidence


def test_a_rebinding_chain_three_passes_deep_is_seen(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            a = b = c = passages
            for _ in range(3):
                c = b
                b = a
                a = []
            return c
        """)
    assert v.status == "active", v.evidence


@pytest.mark.parametrize("jump", ["break", "continue"])
def test_the_state_at_a_break_or_continue_reaches_the_exit(tmp_path, jump):
    v = verdict(tmp_path, f"""
        def rewrite_context(self, query, passages):
            out = passages
            for _ in range(3):
                if query:
                    out = []
                    {jump}
            return out
        """)
    assert v.status == "active", v.evidence


def test_while_true_leaves_by_its_break(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            out = passages
            while True:
                if query:
                    out = []
                    break
            return out
        """)
    assert v.status == "active", v.evidence


def test_the_else_clause_runs_on_the_normal_exit(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            out = passages
            for p in passages:
                pass
            else:
                out = []
            return out
        """)
    assert v.status == "active", v.evidence


def test_the_else_clause_does_not_overwrite_what_a_break_carried_out(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            out = passages
            for _ in range(3):
                if query:
                    out = []
                    break
            else:
                out = passages
            return out
        """)
    assert v.status == "active", v.evidence


def test_a_break_that_only_keeps_the_input_stays_a_pass_through(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            out = passages
            for p in passages:
                if query:
                    break
            else:
                out = passages[:]
            return out
        """)
    assert v.status == "inactive", v.evidence


def test_an_empty_loop_body_leaves_the_state_unchanged(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            for p in passages:
                pass
            while False:
                passages = []
            return passages
        """)
    assert (v.status, v.form) == ("inactive", "returns-argument"), v.evidence


def test_a_counter_settles_and_the_rebuild_idiom_stays_a_pass_through(tmp_path):
    v = verdict(tmp_path, """
        def rewrite_context(self, query, passages):
            out, i = [], 0
            for p in passages:
                out.append(p)
                i += 1
            return out
        """)
    assert v.status == "inactive", v.evidence


def test_a_filter_behind_a_pattern_skip_is_pattern_limited(tmp_path):
    v = verdict(tmp_path, """
        import re
        EMAIL = re.compile("@")
        def rewrite_context(self, query, passages):
            kept = []
            for p in passages:
                if EMAIL.search(p.text):
                    continue
                kept.append(p)
            return kept
        """)
    assert (v.status, v.pattern) == ("pattern-limited", "EMAIL"), v.evidence


@pytest.mark.parametrize("returned, expected", [("passages", "inactive"), ("acc", "active")])
def test_a_value_nesting_without_end_does_not_hang(tmp_path, returned, expected):
    v = verdict(tmp_path, f"""
        def rewrite_context(self, query, passages):
            acc = passages
            for p in passages:
                acc = [acc, p]
            return {returned}
        """)
    assert v.status == expected, v.evidence
