"""Figures as inline SVG strings (matplotlib, Agg backend), so report.html is self-contained."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ragleak.grid.store import MEASURED  # noqa: E402
from ragleak.report.evidence import MIN_SAMPLE  # noqa: E402

MIN_CANDIDATES = MIN_SAMPLE["candidates"]


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def leakage_bars(levels: list[dict[str, Any]], metric: str) -> str | None:
    """One metric's mean per defense. Error bars only where there is an interval (no zero-width
    caps posing as precision); each bar says its n (and "of N" where it counts out of N); a bar
    resting on fewer units than the minimum sample is hatched and marked."""
    from ragleak.metrics import metric_info, metric_title

    rows = [r for r in levels if r["metric"] == metric]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 2.9))
    names = [r["defense"] for r in rows]
    est = [r["estimate"] for r in rows]
    bars = ax.bar(names, est, color=["#c9a227" if r.get("small_sample") else "#4c72b0" for r in rows])
    for bar, r in zip(bars, rows):
        if r.get("small_sample"):
            bar.set_hatch("//")
        if r["low"] is not None and r["high"] is not None and r["high"] > r["low"]:  # no zero-width caps
            ax.errorbar(bar.get_x() + bar.get_width() / 2, r["estimate"],
                        yerr=[[r["estimate"] - r["low"]], [r["high"] - r["estimate"]]], color="black", capsize=4)
        n = r.get("n_min")
        label = (f"{r['estimate']:.3g}" + (f" {r['of']}" if r.get("of") is not None else "")
                 + ("" if n is None else f"\nn={n}") + (" (small)" if r.get("small_sample") else ""))
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=6)
    info = metric_info(metric)  # levels hold registered metrics only
    title = metric_title(metric)
    direction = "higher = more leakage" if info["higher_is_leakier"] else "lower = more leakage"
    ax.set_ylabel(info["unit"], fontsize=7)
    ax.set_title(f"{title} per defense ({direction}); mean over cells, 95% interval where there is one; "
                 "hatched: below the minimum sample", fontsize=7)
    ax.margins(y=0.25)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    return _svg(fig)


def epsilon_curves(guarantees: list[dict[str, Any]]) -> str | None:
    curves = [g for g in guarantees if g["curve"]]
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    for g in curves:
        pts = [(p["queries"], p["eps"]) for p in g["curve"] if p["eps"] is not None and p["eps"] != float("inf")
               and not isinstance(p["eps"], str)]
        if pts:
            label = g["defense"] + (f" ({g['epsilon_setting']})" if g["epsilon_setting"] else "")
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("queries T")
    ax.set_ylabel("epsilon(T)")
    ax.set_title("epsilon after T queries (tight accountant)", fontsize=9)
    ax.legend(fontsize=7)
    return _svg(fig)


def roc_curves(run_dir: Path, records) -> str | None:
    from sklearn.metrics import roc_curve

    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    drawn = 0
    for r in records:
        reading = r.metrics.get("mi_auc") if r.status in MEASURED else None
        if reading is None or reading.value is None:
            continue
        path = Path(run_dir) / "transcripts" / f"{r.cell_id}.json"
        if not path.exists():
            continue
        scorer = reading.details["headline_scorer"]  # the scorer the metric reports
        # as the metric does: only candidates labelled and scored by it (a failed probe has no score)
        membership = [m for m in json.loads(path.read_text())["membership"]
                      if m.get("member") is not None and scorer in m["scores"]]
        if not membership:
            continue
        fpr, tpr, _ = roc_curve([int(m["member"]) for m in membership], [m["scores"][scorer] for m in membership])
        small = " - too few to read" if len(membership) < MIN_CANDIDATES else ""
        ax.plot(fpr, tpr, label=f"{r.spec.defense} ({scorer}, seed {r.spec.seed}; n={len(membership)} candidates{small})")
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=0.8)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("membership inference ROC", fontsize=9)
    ax.legend(fontsize=6)
    return _svg(fig)


def utility_plot(curves: list[dict[str, Any]]) -> str | None:
    """Private-RAG's U(t): active documents and answer quality against the query index."""
    if not curves:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.6, 3.0))
    for c in curves:
        t = [p["t"] for p in c["points"]]
        label = c["label"].split("/eps=")[0]
        left.plot(t, [p["active_docs"] for p in c["points"]], marker=".", label=label)
        q = [(p["t"], p["quality"]) for p in c["points"] if p["quality"] is not None]
        if q:
            right.plot(*zip(*q), marker=".", label=label)
    left.set_xlabel("query index t")
    left.set_ylabel("active documents")
    left.set_title("documents with budget left", fontsize=9)
    right.set_xlabel("query index t")
    right.set_ylabel("ROUGE-L F1 vs undefended answer")
    right.set_ylim(-0.02, 1.02)
    right.set_title("answer quality U(t)", fontsize=9)
    left.legend(fontsize=6)
    return _svg(fig)
