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


#: the significance colours of the forest plot and the verdict table (html.py's CSS uses the same)
FELL, ROSE, WITHIN = "#2e7d32", "#c62828", "#8a8f98"


def _grid(n: int, ncols: int, row_height: float, width: float = 11.0):
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, 0.55 + row_height * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _short(title: str) -> str:
    return title if len(title) <= 30 else title[:29] + "…"


def forest(rows: list[dict[str, Any]], titles: dict[str, str], leakier: dict[str, bool]) -> str | None:
    """Small multiples, one panel per metric: each defense's paired change against the baseline
    with its 95% interval; green where the interval lies wholly on the less-leaky side of 0, red on
    the leakier side, grey where it covers 0, a hollow marker with no bar where there is no interval
    (one distinct pair). ``rows``: delta rows (defense, metric, delta, low, high)."""
    from ragleak.report.verdict import movement

    if not rows:
        return None
    metrics = sorted({r["metric"] for r in rows}, key=lambda m: (titles.get(m, m).lower(), m))
    defenses = sorted({r["defense"] for r in rows}, reverse=True)  # alphabetical from the top
    fig, axes = _grid(len(metrics), 4, 0.32 * len(defenses) + 0.55)
    colour = {"fell": FELL, "rose": ROSE, "within": WITHIN, "no interval": WITHIN}
    for ax, metric in zip(axes, metrics):
        ax.axvline(0, color="#444", lw=0.8)
        for r in (r for r in rows if r["metric"] == metric):
            y = defenses.index(r["defense"])
            moved = movement(r, leakier.get(metric, True))
            if moved == "no interval":
                ax.plot(r["delta"], y, "o", mfc="white", mec=WITHIN, ms=5)
                continue
            ax.errorbar(r["delta"], y, xerr=[[r["delta"] - r["low"]], [r["high"] - r["delta"]]], fmt="o",
                        color=colour[moved], ms=4, capsize=2, lw=1.2)
        ax.set_yticks(range(len(defenses)), defenses, fontsize=7)
        ax.set_ylim(-0.6, len(defenses) - 0.4)
        ax.tick_params(axis="x", labelsize=6.5)
        arrow = "" if leakier.get(metric, True) else " (lower = leakier)"
        ax.set_title(_short(titles.get(metric, metric)) + arrow, fontsize=8)
        if not ax.get_subplotspec().is_first_col():
            ax.tick_params(labelleft=False)
    fig.suptitle("change against the undefended baseline (defense minus none, paired cells), 95% interval; "
                 "green: fell, red: rose, grey: interval covers 0, hollow: no interval", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return _svg(fig)


def level_panels(levels: list[dict[str, Any]], titles: dict[str, str]) -> str | None:
    """Small multiples, one panel per metric: each defense's mean with its 95% interval where there
    is one; amber where the reading rests on fewer units than its minimum sample."""
    if not levels:
        return None
    metrics = sorted({r["metric"] for r in levels}, key=lambda m: (titles.get(m, m).lower(), m))
    defenses = sorted({r["defense"] for r in levels}, reverse=True)
    fig, axes = _grid(len(metrics), 4, 0.3 * len(defenses) + 0.55)
    for ax, metric in zip(axes, metrics):
        for r in (r for r in levels if r["metric"] == metric):
            y = defenses.index(r["defense"])
            c = "#c9a227" if r.get("small_sample") else "#4c72b0"
            ax.barh(y, r["estimate"], color=c, height=0.6)
            if r.get("low") is not None and r.get("high") is not None and r["high"] > r["low"]:
                ax.errorbar(r["estimate"], y, xerr=[[r["estimate"] - r["low"]], [r["high"] - r["estimate"]]],
                            color="black", capsize=2, lw=0.9)
        ax.set_yticks(range(len(defenses)), defenses, fontsize=7)
        ax.set_ylim(-0.6, len(defenses) - 0.4)
        ax.tick_params(axis="x", labelsize=6.5)
        ax.set_title(_short(titles.get(metric, metric)), fontsize=8)
        if not ax.get_subplotspec().is_first_col():
            ax.tick_params(labelleft=False)
    fig.suptitle("mean per defense over its cells, 95% interval where there is one; amber: below the minimum "
                 "sample", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return _svg(fig)


def figures(summary: dict[str, Any], run_dir: Path, records) -> dict[str, str | None]:
    """Every figure report.html shows, by the key html.render reads it under."""
    from ragleak.report.verdict import delta_rows, is_leakage, without_duplicates

    info = summary.get("metrics") or {}
    titles = {k: v.get("title", k) for k, v in info.items()}
    leakier = {k: bool(v.get("higher_is_leakier", True)) for k, v in info.items()}
    levels = without_duplicates([r for r in summary.get("levels") or [] if is_leakage(summary, r["metric"])],
                                ("estimate", "low", "high"))
    return {"forest": forest([r for r in delta_rows(summary) if is_leakage(summary, r["metric"])], titles, leakier),
            "levels": level_panels(levels, titles),
            "roc": roc_curves(run_dir, records),
            "eps": epsilon_curves(summary.get("guarantees") or []),
            "utility": utility_plot(summary.get("utility_curves") or []),
            "frontier": _frontier(summary.get("utility"))}


def _frontier(utility: Any) -> str | None:
    """The privacy-utility frontier (``report.utility.frontier_figure``) where the run measured utility."""
    if not isinstance(utility, dict) or not utility.get("rows"):
        return None
    from ragleak.report.utility import frontier_figure

    return frontier_figure(utility["rows"], utility.get("leakage_title"))


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
