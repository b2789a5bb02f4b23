"""The Mind-the-Hook paper's tables over a run, beside the generic report.

* **Table II**, one row per defense: e-mail and person-name ``nel_strict`` (the parts
  ``nel_strict[EMAIL_REAL]`` and ``nel_strict[PERSON_NAME]``) as per-run means for the baseline
  and as signed changes (defense minus baseline, paired; negative is a reduction, also given
  relative to the baseline's mean, as the paper's "-95.6%") for every other defense; MI AUC on
  Synthetic-Corp as a level per defense; and, per column, whether the reading is interpretable by
  the metric-to-channel map (an active hook of the defense reaches the channel the metric reads).
* **Table III**, canary recovery per defense and seed (Clopper-Pearson), and per defense against
  the baseline: the one-sided Fisher exact test over the pooled (canary, seed) opportunities and
  the exact McNemar test over the paired ones (the same canaries under both arms).
* **Findings**, per defense: every metric whose paired delta moved beyond its interval (the 95%
  interval excludes 0), and whether the audit says the defense can act on that metric's channel.

Every interval is the report's: cells are the resampling unit, deterministic copies (equal
release digests) are collapsed before 2,000 percentile-bootstrap resamples (95%)
(``metrics.stats``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ragleak.grid.store import MEASURED, CellRecord
from ragleak.report.cells import BASELINE

EMAIL = "nel_strict[EMAIL_REAL]"
PERSON = "nel_strict[PERSON_NAME]"
MI = "mi_auc"
MI_CORPUS = "synthetic-corp"
CANARY = "canary_recovery"


def _moved(delta: dict[str, Any]) -> bool | None:
    """Whether a paired delta's interval excludes 0 (None: no interval, one distinct pair)."""
    if delta.get("low") is None or delta.get("high") is None:
        return None
    return delta["low"] > 0 or delta["high"] < 0


def _column(defense: str, key: str, levels: dict, deltas: dict, audit: dict) -> dict[str, Any] | None:
    level = levels.get((defense, key))
    if level is None:
        return None
    if defense == BASELINE:
        return {"kind": "level", "value": level["estimate"], "low": level["low"], "high": level["high"],
                "n_unique": level["n_unique"]}
    delta = deltas.get((defense, key))
    if delta is None:
        return {"kind": "level", "value": level["estimate"], "low": level["low"], "high": level["high"],
                "n_unique": level["n_unique"], "note": "no paired baseline cell"}
    base = levels.get((BASELINE, key))
    relative = None if not base or not base["estimate"] else delta["delta"] / base["estimate"]
    interpretable, reason = audit.get((defense, key), (None, "not audited"))
    return {"kind": "reduction", "delta": delta["delta"], "low": delta["low"], "high": delta["high"],
            "relative_change": relative, "pairs": delta["unique_pairs"], "moved": _moved(delta),
            "interpretable": interpretable, "reason": reason}


def table_two(agg: dict[str, Any], mi_agg: dict[str, Any], audit_cells: list[dict]) -> list[dict]:
    """Table II rows (see the module docstring): ``agg`` and ``audit_cells`` are the summary's
    aggregate and Table II cells, ``mi_agg`` the aggregate of the Synthetic-Corp cells alone."""
    levels = {(lv["defense"], lv["metric"]): lv for lv in agg["levels"]}
    deltas = {(d["defense"], d["metric"]): d for d in agg["deltas"]}
    audit = {(c["defense"], c["metric"]): (c["interpretable"], c["reason"]) for c in audit_cells}
    mi_levels = {(lv["defense"], lv["metric"]): lv for lv in mi_agg["levels"] if lv["metric"] == MI}
    mi_deltas = {(d["defense"], d["metric"]): d for d in mi_agg["deltas"] if d["metric"] == MI}
    defenses = sorted({d for d, _ in levels}, key=lambda d: (d != BASELINE, d))
    rows = []
    for defense in defenses:
        mi = mi_levels.get((defense, MI))
        mi_cell = None
        if mi is not None:
            d = mi_deltas.get((defense, MI))
            interpretable, reason = audit.get((defense, MI), (None, "baseline" if defense == BASELINE else "not audited"))
            mi_cell = {"value": mi["estimate"], "low": mi["low"], "high": mi["high"], "n_unique": mi["n_unique"],
                       "delta": None if d is None else d["delta"], "moved": None if d is None else _moved(d),
                       "interpretable": None if defense == BASELINE else interpretable, "reason": reason}
        rows.append({"defense": defense, "email": _column(defense, EMAIL, levels, deltas, audit),
                     "person": _column(defense, PERSON, levels, deltas, audit), "mi_auc_synthetic_corp": mi_cell})
    return rows


def canary_variant(r: CellRecord) -> str:
    """The canaries' kind: the attack's ``variant`` where it planted them itself; a planted copy's
    manifest (a ``manifest`` parameter, or an endpoint's view file) mixes e-mail addresses and
    names, so its cells are ``manifest``, never the variant parameter's default."""
    if r.spec.attack_params.get("manifest") or r.spec.view:
        return "manifest"
    return str(r.spec.attack_params.get("variant", "email"))


def _canary_runs(records: list[CellRecord]) -> dict[tuple[str, str, float | None], dict[int, dict[str, Any]]]:
    """(defense, variant, applied epsilon) -> seed -> the first measured canary cell's reading
    (later cells of the same key and seed are copies: an epsilon the defense does not take)."""
    out: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        m = r.metrics.get(CANARY)
        if r.status not in MEASURED or m is None or m.value is None:
            continue
        key = (r.spec.defense, canary_variant(r), r.spec.applied_epsilon)
        out[key].setdefault(r.spec.seed, {"recovered": int(m.details.get("recovered", 0)), "total": m.n,
                                          "hits": m.details.get("hits"), "ci": list(m.interval or [])})
    return out


def table_three(records: list[CellRecord]) -> list[dict[str, Any]]:
    """Table III: per (defense, variant) the per-seed recoveries, the pooled total with its
    Clopper-Pearson interval, and against the baseline's same variant: Fisher one-sided (H1: the
    baseline recovers more) and, where both arms name their hits over the same seeds, McNemar."""
    from ragleak.metrics.canary import fisher_one_sided, mcnemar_one_sided
    from ragleak.metrics.membership import clopper_pearson

    runs = _canary_runs(records)
    rows = []
    order = sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0] != BASELINE, kv[0][0], kv[0][2] or 0.0))
    for (defense, variant, epsilon), seeds in order:
        k, n = sum(s["recovered"] for s in seeds.values()), sum(s["total"] for s in seeds.values())
        row: dict[str, Any] = {"defense": defense, "variant": variant, "epsilon": epsilon,
                               "per_seed": [{"seed": seed, **{x: v for x, v in s.items() if x != "hits"}}
                                            for seed, s in sorted(seeds.items())],
                               "recovered": k, "total": n, "ci95": list(clopper_pearson(k, n)),
                               "fisher_p": None, "mcnemar_p": None}
        base = runs.get((BASELINE, variant, None))
        if defense != BASELINE and base:
            bk, bn = sum(s["recovered"] for s in base.values()), sum(s["total"] for s in base.values())
            row["fisher_p"] = fisher_one_sided(bk, bn, k, n).p_value
            paired = set(base) == set(seeds) and all(
                base[s]["hits"] is not None and seeds[s]["hits"] is not None and base[s]["total"] == seeds[s]["total"]
                for s in seeds)
            if paired:
                hits_base = {(s, c) for s, v in base.items() for c in v["hits"]}
                hits = {(s, c) for s, v in seeds.items() for c in v["hits"]}
                row["mcnemar_p"] = mcnemar_one_sided(len(hits_base - hits), len(hits - hits_base))
        rows.append(row)
    return rows


_VERDICT = {
    (True, True): "moved beyond its interval, and an active hook reaches its channel: the defense acts there",
    (True, False): "moved beyond its interval, but no active hook reaches its channel: a side effect, not protection",
    (False, True): "within its interval, although an active hook reaches its channel",
    (False, False): "within its interval; the defense does not act on its channel",
}


def scorer_overlap(defense: str) -> dict[str, Any] | None:
    """For a defense that substitutes values (it declares ``substitution_values``): how NEL files its
    substitutes (swallowed by a placeholder vocabulary, or counted as leaked items); else None."""
    from ragleak.defenses import DEFENSES
    from ragleak.metrics.nel import vocabulary_overlap

    try:
        values = getattr(DEFENSES.get(defense), "substitution_values", None)
    except Exception:  # an unknown or unimportable defense has nothing to check here
        return None
    if values is None:
        return None
    report = vocabulary_overlap(values())
    notes = []
    if report["swallowed"]:
        notes.append(f"{report['swallowed']} of its {report['values']} substitutes are on a placeholder vocabulary NEL "
                     "excludes (Type A: NEL cannot see them, by construction)")
    if report["counted"]:
        notes.append(f"{report['counted']} of its substitutes are counted by nel_strict as leaked items (its "
                     "pseudonyms read as leaks)")
    return {**report, "note": "; ".join(notes) or "NEL neither excludes nor counts its substitutes"}


def findings(agg: dict[str, Any], audit_cells: list[dict]) -> list[dict[str, Any]]:
    """Per defense: each metric's paired delta, whether it moved, and what the audit says of it;
    for a substituting defense, how the NEL scorer files its substitutes."""
    audit = {(c["defense"], c["metric"]): c for c in audit_cells}
    by_defense: dict[str, list[dict]] = defaultdict(list)
    for d in agg["deltas"]:
        cell = audit.get((d["defense"], d["metric"]))
        moved = _moved(d)
        interpretable = None if cell is None else cell["interpretable"]
        if moved is None:
            verdict = "no interval (one distinct pair of cells)"
        elif interpretable is None:
            verdict = "moved beyond its interval; not audited" if moved else "within its interval; not audited"
        else:
            verdict = _VERDICT[(moved, interpretable)]
        by_defense[d["defense"]].append({"metric": d["metric"], "delta": d["delta"], "low": d["low"], "high": d["high"],
                                         "moved": moved, "interpretable": interpretable,
                                         "reason": None if cell is None else cell["reason"], "verdict": verdict})
    out = []
    for defense, items in sorted(by_defense.items()):
        items.sort(key=lambda i: (not i["moved"], i["metric"]))
        out.append({"defense": defense, "moved": [i["metric"] for i in items if i["moved"]],
                    "moved_where_it_acts": [i["metric"] for i in items if i["moved"] and i["interpretable"]],
                    "moved_where_it_cannot_act": [i["metric"] for i in items if i["moved"] and i["interpretable"] is False],
                    "metrics": items, "scorer_overlap": scorer_overlap(defense)})
    return out


def paper_tables(records: list[CellRecord], agg: dict[str, Any], mi_agg: dict[str, Any],
                 audit_cells: list[dict]) -> dict[str, Any]:
    """Table II, Table III and the findings, as the summary's ``paper`` section (``mi_agg``: the
    aggregate of the ``MI_CORPUS`` cells alone)."""
    return {"table_two": table_two(agg, mi_agg, audit_cells), "table_three": table_three(records),
            "findings": findings(agg, audit_cells),
            "columns": {"email": EMAIL, "person": PERSON, "mi": f"{MI} on {MI_CORPUS}"}}
