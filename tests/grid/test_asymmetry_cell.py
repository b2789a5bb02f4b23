"""The knowledge-asymmetry attack as a grid cell on the real stack: its plain LLM shares the run's
generation cache, and the cell record carries ESR/F1/AUC for the report."""

from __future__ import annotations

import pytest

from ragleak.grid.cell import execute_cell
from ragleak.grid.spec import CellSpec
from ragleak.grid.store import RunStore

pytestmark = pytest.mark.model


def test_asymmetry_cell_records_attribution_metrics_and_reuses_the_cache(tmp_path):
    spec = CellSpec(attack="asymmetry", defense="none", corpus="synthetic-corp", budget=2,
                    attack_params={"keywords": ["wire transfer", "personnel file"]},
                    corpus_params={"n_docs": 12}, stack={"decoding": {"max_tokens": 64}})
    RunStore(tmp_path).cells_dir.mkdir(parents=True)
    RunStore(tmp_path).transcripts_dir.mkdir(parents=True)
    first = execute_cell(spec, str(tmp_path))
    assert first.status == "ok", first.traceback
    m = first.metrics
    esr = m["attribution_esr"]
    assert esr.n_of == "sentences" and esr.n >= 1 and 0 <= esr.details["private"] <= esr.n
    assert esr.failed == first.counts.errors and first.counts.answered + first.counts.errors == first.counts.queries
    for key in ("attribution_f1", "attribution_auc"):  # defined, or undefined with the reason
        assert m[key].value is not None or m[key].note
    assert m["nel_strict"].n == first.counts.answered and "nel_strict[EMAIL_REAL]" in m
    # 2 RAG answers + 2 plain-LLM answers + one likelihood pass of the plain LLM per RAG sentence
    # (the surprisal scorer), all through the run's cache; with keywords given, the attacker LLM
    # (zero prior's query writer) is not called
    used = {role: c for role, c in first.usage.calls_by_role.items() if c["model_calls"] or c["cache_hits"]}
    assert set(used) == {"target", "standard"} and first.usage.cache_hits == 0
    assert used["target"] == {"model_calls": 2, "cache_hits": 0, "cache_waited": 0, "cache_repeats": 0}
    assert used["standard"]["model_calls"] == 2 + esr.n and first.usage.model_calls == 4 + esr.n
    again = execute_cell(spec, str(tmp_path))
    assert again.usage.model_calls == 0 and again.usage.cache_hits == first.usage.model_calls
    assert again.metrics == first.metrics
