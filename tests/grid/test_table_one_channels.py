"""The grid's Table I reads each hook's per-channel effect from its real cells (issue 38): a hook
that changes its own output but no channel (a monotone rescoring, a candidate-pool cap above
top-k) is inactive, and says so; a real context masker that changes the prompt is on its path.
Records written before the channel effect are read by their own-output counts, and say so.

The hooks run through the real pipeline; the generator is scripted (the logic under test is the
recording and the table, not the model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from ragleak import measure
from ragleak.cli.tables import render_table_one
from ragleak.defenses import DEFENSES, Defense
from ragleak.defenses.pad_regex import RegexContextMasking
from ragleak.grid import cell as cell_module
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import CellSpec, GridConfig
from ragleak.grid.store import CellRecord, QueryCounts, RunStore
from ragleak.records import Passage, Scored
from ragleak.report.html import table_one_html
from ragleak.report.summary import audit_tables
from ragleak.testing import copy_context, pipeline_under_test, tiny_stack


class MinMaxScores(Defense):
    """Min-max normalises the scores: monotone, so the same top-k in the same order."""

    name = "t1-minmax"
    hooks = frozenset({"score_retrieval"})

    def score_retrieval(self, query, candidates):
        lo, hi = min(c.score for c in candidates), max(c.score for c in candidates)
        return [c.model_copy(update={"score": (c.score - lo) / ((hi - lo) or 1.0)}) for c in candidates]


class PoolCap(Defense):
    """Keeps the best top_k + 1 candidates: a cap above top-k."""

    name = "t1-pool-cap"
    hooks = frozenset({"score_retrieval"})
    keep = 4  # the stacks below select 3

    def score_retrieval(self, query, candidates):
        return sorted(candidates, key=lambda c: -c.score)[: self.keep]


class IdRewrite(Defense):
    name = "t1-ids"
    hooks = frozenset({"score_retrieval"})

    def score_retrieval(self, query, candidates):
        return [c.model_copy(update={"passage": c.passage.model_copy(update={"id": "x-" + c.passage.id})})
                for c in candidates]


class Reverse(Defense):
    name = "t1-reverse"
    hooks = frozenset({"score_retrieval", "rewrite_context"})

    def score_retrieval(self, query, candidates):
        return list(reversed(candidates))  # scores untouched: at most the tie-break among equal scores

    def rewrite_context(self, query, passages):
        return list(reversed(passages))


class DropBest(Defense):
    name = "t1-drop-best"
    hooks = frozenset({"score_retrieval"})

    def score_retrieval(self, query, candidates):
        best = max(range(len(candidates)), key=lambda i: candidates[i].score)
        return [c.model_copy(update={"score": -1.0}) if i == best else c for i, c in enumerate(candidates)]


class WordIndex:
    """Candidates scored by distinct shared words, ties broken by a small per-passage offset."""

    def __init__(self, texts: dict[str, str]):
        self.passages = [Passage(id=f"{k}#0", doc_id=k, text=v) for k, v in texts.items()]

    def search(self, query, k):
        words = set(query.lower().split())
        scored = [Scored(passage=p, score=len(words & set(p.text.lower().split())) + i / 100)
                  for i, p in enumerate(self.passages)]
        return sorted(scored, key=lambda s: -s.score)[:k]


DOCS = {
    "a": "Alice Jones can be reached at alice.jones@acme-corp.com about the merger",
    "b": "the ferry leaves every ninety minutes from the north pier",
    "c": "the garden opens at seven on weekdays",
    "d": "room seventeen stores the spare servo motors",
    "e": "the merger closes next week says the ferry operator",
}
QUERIES = ("who is alice jones", "when does the ferry leave", "garden opening", "merger news")


def _channels(defense) -> list[dict[str, str]]:
    pipeline = pipeline_under_test(WordIndex(DOCS), copy_context, defense, top_k=2, candidate_k=5)
    return [{h.hook: h.channel for h in pipeline.answer(q).trace.hooks} for q in QUERIES]


def test_each_call_records_its_effect_on_the_channel_it_feeds():
    for defense in (MinMaxScores(), PoolCap(), IdRewrite()):  # own output changes, the top-k does not
        assert all(c["score_retrieval"] == "unchanged" for c in _channels(defense)), defense.name
    reverse = _channels(Reverse())
    assert {c["score_retrieval"] for c in reverse} == {"unchanged"}  # no ties: the same top-k
    assert {c["rewrite_context"] for c in reverse} == {"reordered"}  # the same passages in another order
    assert {c["score_retrieval"] for c in _channels(DropBest())} == {"changed"}
    masked = _channels(RegexContextMasking())
    # the e-mail (document a) is in the context of the first and the last query: the prompt changes there alone
    assert [c["rewrite_context"] for c in masked] == ["changed", "unchanged", "unchanged", "changed"]
    assert all(c["generate"] == "unchanged" and c["postprocess"] == "unchanged" for c in masked)


# ---------------------------------------------------------------- the grid's Table I from cells

CONFIG = GridConfig(attacks=["ps"], defenses=["t1-minmax", "t1-pool-cap", "pad-regex-context"],
                    corpora=["synthetic-corp"], seeds=[0], budget=4, corpus_params={"synthetic-corp": {"n_docs": 12}})


@pytest.fixture(scope="module")
def grid_records(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for cls in (MinMaxScores, PoolCap):
        DEFENSES.register(cls.name, f"{__name__}:{cls.__name__}")
    mp.setattr(cell_module, "cell_stack", lambda spec, run_dir: tiny_stack(
        cache_path=Path(run_dir) / "generations.sqlite", target=copy_context))
    # Table I reads the hook summaries, not the readings: the metrics' models are not loaded here
    mp.setattr(measure, "compute_metrics", lambda transcript, context: {})
    try:
        run = tmp_path_factory.mktemp("grid")
        run_grid(CONFIG, run, workers=1)
        records = RunStore(run).records()
        yield records, audit_tables(records, [])
    finally:
        mp.undo()
        for cls in (MinMaxScores, PoolCap):
            DEFENSES.unregister(cls.name)


def test_the_grid_table_one_reads_the_per_channel_effect(grid_records):
    records, tables = grid_records
    assert {r.status for r in records} == {"ok"}
    rows = {r["defense"]: r for r in tables["table_one"]}
    for name in ("t1-minmax", "t1-pool-cap"):
        cell = rows[name]["hooks"]["score_retrieval"]
        dyn = cell["dynamic"]
        assert dyn["basis"] == "channel" and dyn["changed"] == 0 and dyn["output_changed"] == dyn["calls"] > 0, dyn
        assert cell["verdict"] == "inactive" and not cell["active"]
        assert f"changed its own output in {dyn['calls']} calls; no channel changed" in cell["reason"]
        assert rows[name]["status"] == "inactive"
        assert any("score_retrieval is inactive" in p for p in rows[name]["problems"])
    masker = rows["pad-regex-context"]
    ctx = masker["hooks"]["rewrite_context"]
    assert ctx["dynamic"]["basis"] == "channel" and 0 < ctx["dynamic"]["changed"] <= ctx["dynamic"]["calls"]
    assert ctx["verdict"] == "pattern-limited" and ctx["active"] and "rewrite_context" in masker["active_hooks"]
    assert masker["status"] == "pattern-limited"
    # the cells keep the channel counts beside the own-output ones
    summary = next(r for r in records if r.spec.defense == "t1-minmax").hook_summary["score_retrieval"]
    assert summary["channel_changed"] == 0 and summary["changed"] == summary["channel_calls"] == summary["calls"]
    text = _text(render_table_one(list(rows.values())))
    assert "(own " in text and "changed a channel" in text
    assert "(own " in table_one_html(list(rows.values()))


def _record(defense: str, seed: int, hooks: dict) -> CellRecord:
    s = CellSpec(attack="ps", defense=defense, corpus="synthetic-corp", seed=seed)
    return CellRecord(cell_id=s.cell_id, spec=s, status="ok", release_digest=s.cell_id,
                      counts=QueryCounts(queries=4, answered=4, errors=0), hook_summary=hooks)


def test_records_from_before_the_channel_effect_fall_back_and_say_so():
    old = {"postprocess": {"changed": 3, "calls": 4, "reordered": 0, "releases": 0}}
    new = {"postprocess": {"changed": 0, "calls": 4, "reordered": 0, "releases": 0, "channel_calls": 4,
                           "channel_changed": 0, "channel_reordered": 0, "channel_unmeasured": 0}}
    for records in ([_record("pad-regex", 0, old)], [_record("pad-regex", 0, old), _record("pad-regex", 1, new)]):
        cell = audit_tables(records, [])["table_one"][0]["hooks"]["postprocess"]
        assert cell["dynamic"]["basis"] == "own output" and cell["dynamic"]["changed"] == 3
        assert "predate the per-channel effect" in cell["reason"]
        assert "~" in table_one_html(audit_tables(records, [])["table_one"])
    cell = audit_tables([_record("pad-regex", 1, new)], [])["table_one"][0]["hooks"]["postprocess"]
    assert cell["dynamic"]["basis"] == "channel" and cell["verdict"] == "pattern-limited"
    assert "predate" not in cell["reason"]


def test_traces_from_before_the_channel_effect_are_read_by_their_own_output():
    from ragleak.audit import hook_activity
    from ragleak.records import Trace

    pipeline = pipeline_under_test(WordIndex(DOCS), copy_context, MinMaxScores(), top_k=2, candidate_k=5)
    traces = [pipeline.answer(q).trace for q in QUERIES]
    new = hook_activity(traces)["t1-minmax"]["score_retrieval"]
    assert new.by_channel and new.label == "0/4" and new.changed == 4
    old = [Trace.model_validate({**t.model_dump(), "hooks": [{k: v for k, v in h.model_dump().items() if k != "channel"}
                                                               for h in t.hooks]}) for t in traces]
    legacy = hook_activity(old)["t1-minmax"]["score_retrieval"]
    assert not legacy.by_channel and legacy.label == "4/4"


def _text(renderable) -> str:
    console = Console(width=240, record=True)
    console.print(renderable)
    return console.export_text()
