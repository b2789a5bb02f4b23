"""U(t) for Private-RAG cells: how the active set and answer quality move with the query index.

Private-RAG charges every relevant document per query and retires it after M charges, so its
answers should degrade as the queries go on. The cell record holds the defense's per-query log
(``defense_state.log``: relevant, charged, active documents, voting agreement); answer quality at
query t is the ROUGE-L F1 of its answer against the undefended baseline's answer to the same
query (the cell run with defense ``none`` under the same attack, corpus, mode, epsilon and seed):
a utility reading relative to the non-private pipeline, since grid queries carry no gold answers.

For every defense, the ``utility`` probe's cells (``attacks.utility``: benign questions with gold
answers from the corpus) give ``utility_frontier``: per defense and applied epsilon, the answers'
token F1 and exact match against the gold answers, their similarity to the undefended answers to
the same questions, and a leakage reading of the same defense and epsilon, each with an interval
(``summary.json["utility"]``); ``frontier_figure`` draws it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ragleak.grid.store import MEASURED, CellRecord, RunStore
from ragleak.lcs import rouge_l
from ragleak.metrics.stats import CONFIDENCE, N_RESAMPLES
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


# -- utility for every defense: the benign-question probe (attacks.utility) and the frontier -------

#: the probe's attack name and the metrics its cells carry (metrics.utility)
PROBE = "utility"
UTILITY_METRIC = "utility_f1"
EXACT_METRIC = "utility_em"
#: the leakage reading a frontier row shows when none is named: the first of these the run's attack
#: cells carry (the PII values leaked, then extraction, canary recovery, membership, names)
LEAKAGE_PREFERENCE = ("pii_leaks", "rougeL_max", "canary_recovery", "mi_auc", "nel_strict", "verbatim_leaks")


def cluster_bootstrap(clusters: list[list[float]], *, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE,
                      seed: int = 0) -> dict[str, Any]:
    """Mean over every unit of ``clusters`` (per cell: its per-question values) with a two-stage
    percentile bootstrap: cells resampled, then questions within each drawn cell, so the interval
    covers run-to-run variation (seeds: other questions, other noise) as well as the questions of a
    run (Davison & Hinkley, 1997, "Bootstrap Methods and their Application", sec. 3.8). With one
    cell it is the bootstrap over its questions; with one question in all there is no interval."""
    clusters = [c for c in clusters if c]
    values = [v for c in clusters for v in c]
    if not values:
        raise ValueError("no units to bootstrap")
    estimate = math.fsum(values) / len(values)
    out = {"estimate": estimate, "low": None, "high": None, "n": len(values), "cells": len(clusters)}
    if len(values) < 2:
        return out
    rng = np.random.default_rng(seed)
    k = len(clusters)
    drawn = rng.integers(0, k, size=(n_resamples, k))  # stage 1: which cells each resample holds
    # stage 2: for every cell, the sum of a question resample in every (resample, slot), so a
    # drawn cell's sum is read off, not drawn in a Python loop
    sums = np.stack([a[rng.integers(0, a.size, size=(n_resamples, k, a.size))].sum(axis=2)
                     for a in (np.asarray(c, dtype=float) for c in clusters)])
    sizes = np.array([len(c) for c in clusters], dtype=float)
    picked = sums[drawn, np.arange(n_resamples)[:, None], np.arange(k)[None, :]]
    means = picked.sum(axis=1) / sizes[drawn].sum(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return {**out, "low": float(low), "high": float(high)}


def _distinct(records: list[CellRecord]) -> list[CellRecord]:
    """One cell per release: an epsilon that is inert for a defense gives copies, not evidence."""
    seen, out = set(), []
    for r in records:
        key = (r.release_digest or r.cell_id, r.spec.seed)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _similarity(store: RunStore, cell: CellRecord, base: CellRecord | None) -> dict[str, list[float]] | None:
    """Per question both cells answered (same index, same question): ROUGE-L F1 and token F1 of the
    defended answer against the undefended one; None without a baseline cell or its transcript."""
    from ragleak.metrics.utility import token_f1

    if base is None:
        return None
    mine, ref = _queries(store, cell.cell_id), _queries(store, base.cell_id)
    if mine is None or ref is None:
        return None
    out: dict[str, list[float]] = {"rouge_l": [], "token_f1": []}
    for index, (question, answer) in mine.items():
        other = ref.get(index)
        if answer is None or other is None or other[0] != question or other[1] is None:
            continue
        out["rouge_l"].append(rouge_l(answer, other[1]).f1)
        out["token_f1"].append(token_f1(answer, other[1]))
    return out


def _queries(store: RunStore, cell_id: str) -> dict[int, tuple[str, str | None]] | None:
    path = store.transcript_path(cell_id)
    if not path.exists():
        return None
    return {q["index"]: (q["query"], q.get("answer") if q.get("error") is None else None)
            for q in json.loads(path.read_text(encoding="utf-8"))["queries"]}


def _per_question(r: CellRecord, key: str) -> list[float]:
    reading = r.metrics.get(key)
    if reading is None or reading.value is None:
        return []
    return [float(q[key.removeprefix("utility_")]) for q in reading.details.get("per_question", [])]


WITHIN = "cells (seeds) and the questions within them"


def _reading(cells: list[CellRecord], metric: str, seed: int) -> dict[str, Any] | None:
    """``metric``'s per-question values over ``cells``: the pooled mean and its two-stage interval."""
    clusters = [_per_question(r, metric) for r in cells]
    if not any(clusters):
        return None
    return {"metric": metric, **cluster_bootstrap(clusters, seed=seed), "interval_over": WITHIN}


def _leakage(cells: list[CellRecord], key: str, seed: int) -> dict[str, Any] | None:
    """The leakage reading over the attack cells of one defense and epsilon: the mean over distinct
    cells with a bootstrap over cells, or one cell's own interval where there is only one."""
    from ragleak.metrics import metric_info
    from ragleak.metrics.stats import bootstrap_mean

    rows = [(r, r.metrics[key]) for r in _distinct(cells) if key in r.metrics and r.metrics[key].value is not None]
    if not rows:
        return None
    iv = bootstrap_mean([float(m.value) for _, m in rows], seed=seed)  # type: ignore[arg-type]
    low, high, over = (iv.low, iv.high, "cells") if iv.n_unique > 1 else (None, None, "none (one cell)")
    if len(rows) == 1 and rows[0][1].interval is not None:
        (low, high), over = rows[0][1].interval, f"{rows[0][1].interval_over or 'units'} of one cell"
    info = metric_info(key)
    return {"metric": key, "title": info["title"], "higher_is_leakier": info["higher_is_leakier"], "estimate": iv.estimate, "low": low, "high": high, "interval_over": over,
            "cells": len(rows), "attacks": sorted({r.spec.attack for r, _ in rows})}


def leakage_metric(records: list[CellRecord]) -> str | None:
    """The frontier's leakage reading: the first of ``LEAKAGE_PREFERENCE`` the attack cells carry."""
    carried = {k for r in records if r.spec.attack != PROBE and r.status in MEASURED
               for k, m in r.metrics.items() if m.value is not None}
    return next((k for k in LEAKAGE_PREFERENCE if k in carried), None)


def utility_frontier(run_dir: Path, records: list[CellRecord], seed: int = 0,
                     leakage: str | None = None) -> dict[str, Any] | None:
    """``summary.json["utility"]``: per defense and applied epsilon, the utility of the benign-question
    probe (token F1 and exact match against the gold answers; ROUGE-L and token F1 against the
    undefended answers) and the leakage reading ``leakage`` of the same defense and epsilon, each with
    an interval. None where the run has no utility cell."""
    from ragleak.metrics import metric_info

    probes = [r for r in records if r.spec.attack == PROBE]
    if not probes:
        return None
    store = RunStore(Path(run_dir))
    measured = [r for r in probes if r.status in MEASURED]
    baselines = {condition_key(r): r for r in measured if r.spec.defense == BASELINE}
    key = leakage or leakage_metric(records)
    groups: dict[tuple[str, float | None], list[CellRecord]] = {}
    for r in measured:
        groups.setdefault((r.spec.defense, r.spec.applied_epsilon), []).append(r)
    attack_cells: dict[tuple[str, float | None], list[CellRecord]] = {}
    for r in records:
        if r.spec.attack != PROBE and r.status in MEASURED:
            attack_cells.setdefault((r.spec.defense, r.spec.applied_epsilon), []).append(r)
    rows = []
    for (defense, eps), cells in sorted(groups.items(), key=lambda kv: (kv[0][0] != BASELINE, kv[0][0],
                                                                         kv[0][1] or 0.0)):
        cells = _distinct(cells)
        param = cells[0].spec.epsilon_param if eps is not None else None
        # the headline (token F1) sits in the row itself, so a reader of flat rows finds it
        f1 = _reading(cells, UTILITY_METRIC, seed) or {"estimate": None, "low": None, "high": None, "n": 0}
        row: dict[str, Any] = {"defense": defense, "epsilon": eps, "epsilon_param": param,
                               "epsilon_setting": None if param is None else f"{param}={eps:g}",
                               "metric": UTILITY_METRIC, "title": metric_info(UTILITY_METRIC)["title"],
                               "estimate": f1["estimate"], "low": f1["low"], "high": f1["high"],
                               "questions": f1["n"], "interval_over": WITHIN,
                               "cells": len(cells), "seeds": sorted({r.spec.seed for r in cells}),
                               "failed_questions": sum(r.counts.errors for r in cells if r.counts is not None),
                               "exact_match": _reading(cells, EXACT_METRIC, seed)}
        if defense == BASELINE:
            row["similarity"] = None  # the baseline is what the others are compared with
        else:
            sims = [_similarity(store, r, baselines.get(condition_key(r))) for r in cells]
            sims = [s for s in sims if s is not None]
            row["similarity"] = None if not sims or not any(s["rouge_l"] for s in sims) else {
                name: {**cluster_bootstrap([s[name] for s in sims], seed=seed), "interval_over": WITHIN}
                for name in ("rouge_l", "token_f1")}
        row["leakage"] = None if key is None else _leakage(attack_cells.get((defense, eps), []), key, seed)
        rows.append(row)
    info = metric_info(key) if key is not None else None
    return {"probe": PROBE, "utility_metric": UTILITY_METRIC, "exact_metric": EXACT_METRIC,
            "leakage_metric": key, "leakage_title": None if info is None else info["title"],
            "leakage_higher_is_leakier": None if info is None else info["higher_is_leakier"],
            "similarity_baseline": BASELINE, "rows": rows,
            "excluded_cells": {s: sum(r.status == s for r in probes) for s in ("failed", "error")}}


_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def frontier_figure(rows: list[dict[str, Any]], leakage_title: str | None = None) -> str | None:
    """The privacy-utility frontier as inline SVG (``summary["utility"]["rows"]``): per defense, its
    epsilons as points (utility on x, leakage on y, 95% intervals as error bars where there are
    any), joined in epsilon order; None where no row has both readings."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [r for r in rows if r.get("estimate") is not None and r.get("leakage")]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    defenses = list(dict.fromkeys(r["defense"] for r in points))
    for i, defense in enumerate(defenses):
        mine = sorted((r for r in points if r["defense"] == defense), key=lambda r: r["epsilon"] or 0.0)
        xs = [r["estimate"] for r in mine]
        ys = [r["leakage"]["estimate"] for r in mine]
        # a marker of its own and a size that shrinks with each defense, so equal points stay visible
        line = ax.plot(xs, ys, marker=_MARKERS[i % len(_MARKERS)], markersize=9 - 5 * i / max(1, len(defenses) - 1),
                       label=defense, alpha=0.85)[0]
        labels: dict[tuple[float, float], list[str]] = {}
        for r, x, y in zip(mine, xs, ys):
            lk = r["leakage"]
            xerr = [[x - r["low"]], [r["high"] - x]] if r["low"] is not None else None
            yerr = [[y - lk["low"]], [lk["high"] - y]] if lk["low"] is not None else None
            if xerr or yerr:
                ax.errorbar(x, y, xerr=xerr, yerr=yerr, color=line.get_color(), capsize=3, lw=0.8)
            if r["epsilon"] is not None:
                labels.setdefault((x, y), []).append(f"{r['epsilon']:g}")
        for (x, y), eps in labels.items():  # epsilons that landed on one point share one label
            ax.annotate(f"eps={', '.join(eps)}", (x, y), textcoords="offset points", xytext=(5, 4 + 7 * i),
                        fontsize=6, color=line.get_color())
    ax.set_xlabel("utility: answer token F1 on benign questions (higher = more useful)", fontsize=7)
    ax.set_ylabel(leakage_title or points[0]["leakage"].get("title") or points[0]["leakage"]["metric"], fontsize=7)
    ax.set_title("privacy-utility frontier per defense (mean, 95% interval where there is one)", fontsize=8)
    ax.legend(fontsize=7)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]
