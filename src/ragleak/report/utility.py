"""U(t) for Private-RAG cells: how the active set and answer quality move with the query index.

Private-RAG charges every relevant document per query and retires it after M charges, so its
answers should degrade as the queries go on. The cell record holds the defense's per-query log
(``defense_state.log``: relevant, charged, active documents, voting agreement); answer quality at
query t is the ROUGE-L F1 of its answer against the undefended baseline's answer to the same
query (the cell run with defense ``none`` under the same attack, corpus, mode, epsilon and seed):
a utility reading relative to the non-private pipeline, since grid queries carry no gold answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragleak.grid.store import MEASURED, CellRecord, RunStore
from ragleak.lcs import rouge_l
from ragleak.report.cells import BASELINE, condition_key


def _answers(store: RunStore, cell_id: str) -> list[str | None] | None:
    path = store.transcript_path(cell_id)
    if not path.exists():
        return None
    return [q.get("answer") for q in json.loads(path.read_text(encoding="utf-8"))["queries"]]


def utility_curves(run_dir: Path, records: list[CellRecord]) -> list[dict[str, Any]]:
    """One curve per measured (ok or partial) cell whose defense logged per-query state (private-rag)."""
    store = RunStore(Path(run_dir))
    baselines = {condition_key(r): r for r in records if r.status in MEASURED and r.spec.defense == BASELINE}
    curves = []
    for r in records:
        log = r.defense_state.get("log") if r.status in MEASURED else None
        if not log:
            continue
        answers = _answers(store, r.cell_id) or []
        base = baselines.get(condition_key(r))
        base_answers = _answers(store, base.cell_id) if base is not None else None
        aligned = len(answers) == len(log)  # one log entry per query that reached retrieval
        points = []
        for i, entry in enumerate(log):
            quality = None
            if aligned and base_answers is not None and i < len(base_answers):
                mine, ref = answers[i], base_answers[i]
                if mine is not None and ref:
                    quality = round(rouge_l(mine, ref).f1, 4)
            points.append({**entry, "quality": quality})
        curves.append({"cell_id": r.cell_id, "label": r.spec.label, "defense": r.spec.defense,
                       "baseline_cell": base.cell_id if base is not None else None,
                       "retired": r.defense_state.get("retired"), "points": points,
                       "note": None if aligned else "log and transcript lengths differ (a query failed before "
                                                    "retrieval); quality not computed"})
    return curves
