"""The grid's audit policy (`--audit all|sample|off`): it decides which reference generations a
defense that replaces ``generate`` costs, changes the trace and never the metrics, is not part of
the cell id, and every cell record states it. Cells run on a ``tiny_stack`` (scripted target)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragleak.defenses import Defense
from ragleak.grid import cell as cell_module
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import RunStore
from ragleak.testing import copy_context, tiny_stack

CONFIG = GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-corp"], seeds=[0, 1], budget=4,
                    corpus_params={"synthetic-corp": {"n_docs": 12}})


class Summarise(Defense):
    """Replaces generation with a call on another prompt, so the audit needs a reference."""

    name = "summarise"
    hooks = frozenset({"generate"})

    def generate(self, messages, passages, generator):
        user = messages[-1].model_copy(update={"content": messages[-1].content + "\nIn one line."})
        return generator.generate([*messages[:-1], user]).text


@pytest.fixture(autouse=True)
def scripted_cells(monkeypatch):
    monkeypatch.setattr(cell_module, "cell_stack",
                        lambda spec, run_dir: tiny_stack(cache_path=Path(run_dir) / "generations.sqlite",
                                                         target=copy_context))
    monkeypatch.setattr(cell_module, "_defense", lambda spec: Summarise())


def _records(run: Path):
    return {r.cell_id: r for r in RunStore(run).records()}


def test_audit_mode_changes_the_trace_and_calls_never_the_metrics_or_the_id(tmp_path):
    configs = {mode: CONFIG.model_copy(update={"audit": mode}) for mode in ("all", "sample", "off")}
    assert len({tuple(c.cell_id for c in config.expand()) for config in configs.values()}) == 1
    runs = {}
    for mode, config in configs.items():
        run_grid(config, tmp_path / mode, workers=1)
        runs[mode] = _records(tmp_path / mode)
    metrics = {mode: {i: {k: m.model_dump() for k, m in r.metrics.items()} for i, r in recs.items()}
               for mode, recs in runs.items()}
    assert metrics["all"] == metrics["sample"] == metrics["off"]
    for mode, recs in runs.items():
        for r in recs.values():
            assert r.audit["mode"] == mode and r.audit["fraction"] == 0.1
            refs = r.audit["references"]
            assert sum(refs.values()) == r.counts.queries == 4
            generate = r.hook_summary["generate"]
            assert generate["calls"] == refs["generated"] + refs["cached"]
            assert generate.get("unaudited", 0) == refs["skipped"]
    off = list(runs["off"].values())
    assert all(r.audit["audited_share"] == 0.0 and r.hook_summary["generate"]["calls"] == 0 for r in off)
    every = list(runs["all"].values())
    assert all(r.audit["audited_share"] == 1.0 for r in every)
    # the references are the model calls the audit saves
    calls = {mode: sum(r.usage.model_calls for r in recs.values()) for mode, recs in runs.items()}
    generated = {mode: sum(r.audit["references"]["generated"] for r in recs.values()) for mode, recs in runs.items()}
    assert generated["off"] == 0 < generated["sample"] <= generated["all"]
    assert calls["all"] - calls["off"] == generated["all"] and calls["sample"] - calls["off"] == generated["sample"]


def test_a_cell_run_without_a_policy_takes_the_run_plans(tmp_path):
    config = CONFIG.model_copy(update={"audit": "off", "audit_fraction": 0.5})
    run_grid(config, tmp_path / "run", workers=1)
    assert cell_module.audit_policy(tmp_path / "run") == config.audit_policy()
    assert cell_module.audit_policy(tmp_path / "nowhere").mode == "sample"
