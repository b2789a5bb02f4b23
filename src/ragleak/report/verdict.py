"""The report's first screen: one verdict per defense against the undefended baseline or, in a run
with no baseline (an endpoint audit), one per target.

A defense's verdict, per channel its metrics observe: on how many readings leakage *fell* (the 95%
interval of the paired delta against ``none`` lies wholly on the less-leaky side of 0), *rose*
(wholly on the leakier side), or was not shown to move (the interval covers 0, or there is no
interval: one distinct pair); whether an active hook of the defense reaches that channel (Table I
through Table II's ``interpretable``); whether its privacy claim survived the run's lower bounds
(``privacy_checks``); and what it costs in utility where the run measured it (``utility``).

Pure functions of the summary dict: every key is read with ``get`` since summaries written by
older versions lack later keys.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ragleak.report.cells import BASELINE

#: Below this many distinct pairs of cells a paired interval is flagged: the percentile bootstrap
#: over k pairs spans at most their range, and even k pairs all moving one way are not significant
#: at 5% by the exact sign test until 2 * 0.5**k < 0.05, i.e. k >= 6.
MIN_PAIRS = 6

#: The metrics whose readings head a target's verdict (an endpoint audit has no deltas).
TARGET_HEADLINES = ("pii_leaks", "canary_recovery", "mi_auc", "verbatim_leaks", "nel_strict")


def is_leakage(summary: dict[str, Any], key: str) -> bool:
    """Whether ``key`` reads leakage: the utility readings on benign questions (``utility_*``, read
    against gold answers) are a defense's cost, shown in their own column, never counted as leakage."""
    name = _part_of(key)[0]
    info = (summary.get("metrics") or {}).get(key) or {}
    return not name.startswith("utility") and "gold answers" not in (info.get("inputs") or [])


def _part_of(key: str) -> tuple[str, str | None]:
    if key.endswith("]") and "[" in key:
        name, part = key[:-1].split("[", 1)
        return name, part
    return key, None


def duplicate_parts(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> set[str]:
    """Part keys (``m[p]``) that repeat their whole ``m``: ``m`` has this one part in the run and it
    reads the same as ``m`` for every defense (MI AUC with one scorer is its ``[heuristic]`` part).
    A metric with several parts keeps them all: they split the whole, they do not repeat it."""
    by_key: dict[str, dict[str, tuple]] = defaultdict(dict)
    for r in rows:
        by_key[r["metric"]][r["defense"]] = tuple(r.get(f) for f in fields)
    parts: dict[str, list[str]] = defaultdict(list)
    for key in by_key:
        name, part = _part_of(key)
        if part is not None:
            parts[name].append(key)
    return {keys[0] for name, keys in parts.items()
            if len(keys) == 1 and name in by_key and by_key[keys[0]] == by_key[name]}


def without_duplicates(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> list[dict[str, Any]]:
    dup = duplicate_parts(rows, fields)
    return [r for r in rows if r["metric"] not in dup]


@dataclass
class ChannelVerdict:
    channel: str
    fell: list[str] = field(default_factory=list)
    rose: list[str] = field(default_factory=list)
    within: list[str] = field(default_factory=list)  # the interval covers 0
    no_interval: list[str] = field(default_factory=list)  # one distinct pair: no spread to resample
    hook: bool | None = None  # an active hook reaches the channel; None: the defense was not audited
    hook_reason: str = ""
    pairs: int | None = None  # the fewest distinct pairs of cells under any of its readings

    @property
    def readings(self) -> int:
        return len(self.fell) + len(self.rose) + len(self.within) + len(self.no_interval)

    @property
    def outcome(self) -> str:
        if self.fell and self.rose:
            return "mixed"
        if self.fell:
            return "fell"
        if self.rose:
            return "rose"
        return "not shown" if self.within else "no interval"


@dataclass
class DefenseVerdict:
    defense: str
    status: str | None  # Table I's status ("end-to-end", "retrieval-only", ...); None: not audited
    channels: list[ChannelVerdict]
    guarantee: str
    guarantee_state: str  # "beaten", "void", "claimed", "verified", "none"
    utility: list[dict[str, Any]]


@dataclass
class TargetVerdict:
    target: str
    cells: int
    measured: int
    headlines: list[dict[str, Any]]  # level rows of TARGET_HEADLINES, duplicates left out
    leaked: int | None  # distinct leaked items (None: the run lists none)
    leaked_types: dict[str, int]
    gates_failed: list[str]
    endpoints: list[str] = field(default_factory=list)  # the endpoint labels its cells name (``...@label``)
    leaked_of: dict[str, int] = field(default_factory=dict)  # per type: the distinct values its corpora hold


def _direction(summary: dict[str, Any], cell: dict[str, Any]) -> bool:
    if "higher_is_leakier" in cell:
        return bool(cell["higher_is_leakier"])
    info = (summary.get("metrics") or {}).get(cell["metric"]) or {}
    return bool(info.get("higher_is_leakier", True))


def _channels(summary: dict[str, Any], cell: dict[str, Any]) -> list[str]:
    if cell.get("channels"):
        return list(cell["channels"])
    info = (summary.get("metrics") or {}).get(cell["metric"]) or {}
    return list(info.get("channels") or ["unknown"])


def movement(delta: dict[str, Any], higher_is_leakier: bool) -> str:
    """``fell``/``rose`` (the interval excludes 0 on that side), ``within`` or ``no interval``."""
    low, high = delta.get("low"), delta.get("high")
    if low is None or high is None:
        return "no interval"
    if high < 0 or low > 0:
        less = high < 0 if higher_is_leakier else low > 0
        return "fell" if less else "rose"
    return "within"


def delta_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The paired deltas with what the audit says of each (Table II's cells where the defense was
    audited, the bare delta where it was not), sole parts that repeat their whole left out."""
    audited = {(c["defense"], c["metric"]): c for c in summary.get("table_two") or []}
    rows = [{**audited.get((d["defense"], d["metric"]), {}), **d} for d in summary.get("deltas") or []]
    return without_duplicates(rows, ("delta", "low", "high"))


def _guarantee(summary: dict[str, Any], defense: str) -> tuple[str, str]:
    checks = [c for c in summary.get("privacy_checks") or [] if c.get("defense") == defense]
    texts, states = [], []
    for c in checks:
        setting = f"{c['epsilon_setting']}: " if c.get("epsilon_setting") else ""
        T = c.get("queries")
        if c.get("beaten"):
            texts.append(f"{setting}claim BEATEN by {' and '.join(c.get('beaten_by') or ['a lower bound'])}")
            states.append("beaten")
        elif c.get("claim_void"):
            own = c.get("claim_own_boundary")
            texts.append(f"{setting}void for answers; eps(T={T}) = {_g(own)} on {c.get('boundary', 'its boundary')} only")
            states.append("void")
        else:
            tested = [name for name in ("verify", "mi") if c.get(name)]
            claim = f"{setting}eps(T={T}) = {_g(c.get('claim_eps'))}"
            if tested:
                texts.append(claim + f"; not beaten by {' or '.join('membership' if t == 'mi' else t for t in tested)}")
                states.append("verified")
            else:
                texts.append(claim + "; claimed, no lower bound run")
                states.append("claimed")
    if not checks:
        formal = [g for g in summary.get("guarantees") or [] if g.get("defense") == defense]
        if any(g.get("curve") for g in formal):
            return "stated; no check at the run's query count", "claimed"
        return ("no formal guarantee" if defense != BASELINE else "-"), "none"
    order = ("beaten", "void", "claimed", "verified")
    return "; ".join(texts), min(states, key=order.index)


def _g(x: Any) -> str:
    if isinstance(x, float):
        return "inf" if x == float("inf") else f"{x:.3g}"
    return "-" if x is None else str(x)


def utility_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """``summary["utility"]`` as rows (a list of dicts, or a dict holding ``rows``); [] if absent."""
    data = summary.get("utility")
    if isinstance(data, dict):
        data = data.get("rows") or data.get("levels") or []
    return [r for r in data or [] if isinstance(r, dict)]


def defense_verdicts(summary: dict[str, Any]) -> list[DefenseVerdict]:
    """One verdict per defense that has a paired delta against the baseline (module docstring)."""
    table_one = {r["defense"]: r for r in summary.get("table_one") or []}
    by_defense: dict[str, dict[str, ChannelVerdict]] = defaultdict(dict)
    for row in delta_rows(summary):
        if not is_leakage(summary, row["metric"]):
            continue
        title = row.get("title") or row["metric"]
        moved = movement(row, _direction(summary, row))
        for channel in _channels(summary, row):
            cv = by_defense[row["defense"]].setdefault(channel, ChannelVerdict(channel))
            {"fell": cv.fell, "rose": cv.rose, "within": cv.within, "no interval": cv.no_interval}[moved].append(title)
            if row.get("unique_pairs") is not None:
                cv.pairs = row["unique_pairs"] if cv.pairs is None else min(cv.pairs, row["unique_pairs"])
            if "interpretable" in row:
                cv.hook = bool(cv.hook) or bool(row["interpretable"])
                cv.hook_reason = cv.hook_reason or row.get("reason", "")
    utility = utility_rows(summary)
    out = []
    for defense in sorted(by_defense):
        text, state = _guarantee(summary, defense)
        out.append(DefenseVerdict(defense=defense, status=(table_one.get(defense) or {}).get("status"),
                                  channels=[by_defense[defense][c] for c in sorted(by_defense[defense])],
                                  guarantee=text, guarantee_state=state,
                                  utility=[u for u in utility if u.get("defense") == defense]))
    return out


def target_verdicts(summary: dict[str, Any]) -> list[TargetVerdict]:
    """One verdict per target (a run without a baseline): its headline readings with intervals, the
    distinct items it leaked, and the gates its cells tripped."""
    levels = without_duplicates([r for r in summary.get("levels") or [] if is_leakage(summary, r["metric"])],
                                ("estimate", "low", "high"))
    named = {r["defense"] for r in levels} | set(summary.get("leaks") or {})
    cells: dict[str, list[dict]] = defaultdict(list)
    seen = set()
    # the planned cells with no record (missing, corrupt) count against their target too
    for c in [*(summary.get("cells_table") or []), *(summary.get("incomplete") or [])]:
        if c.get("label") in seen:
            continue
        seen.add(c.get("label"))
        cells[c.get("defense") or _target_of(c, named)].append(c)
    targets = sorted(named | set(cells))
    failed_gates = [g for g in summary.get("gates") or [] if g.get("failed")]
    out = []
    for target in targets:
        # whole metrics only: the parts (per PII type) are in the "what leaked" counts beside them
        heads = [r for r in levels if r["defense"] == target and r["metric"] in TARGET_HEADLINES]
        heads.sort(key=lambda r: (TARGET_HEADLINES.index(_part_of(r["metric"])[0]), r["metric"]))
        items = (summary.get("leaks") or {}).get(target)
        types: dict[str, int] = defaultdict(int)
        heads_of = [h for h in summary.get("leak_headline") or [] if h.get("defense") == target]
        totals: dict[str, int] = {}
        if heads_of:  # the union of distinct values per type over the target's cells
            for h in heads_of:
                types[h.get("type", "?")] += int(h.get("distinct") or 0)
                if h.get("of") is not None:
                    totals[h.get("type", "?")] = totals.get(h.get("type", "?"), 0) + int(h["of"])
            items = [{"total": sum(types.values())}] if sum(types.values()) else []
        else:
            for it in items or []:
                types[it.get("type", "?")] += 1
        mine = cells.get(target, [])
        out.append(TargetVerdict(
            target=target, cells=len(mine), measured=sum(c.get("status") in ("ok", "partial") for c in mine),
            headlines=heads, leaked=None if items is None else (items[0].get("total", len(items)) if items else 0),
            leaked_types={t: n for t, n in sorted(types.items()) if n},
            leaked_of={t: totals[t] for t in types if types[t] and t in totals},
            gates_failed=[g["gate"] for g in failed_gates if _gate_names(g, target)],
            endpoints=sorted({str(c.get("label", "")).rsplit("@", 1)[1] for c in mine if "@" in str(c.get("label", ""))})))
    return out


def _target_of(cell: dict[str, Any], named: set[str]) -> str:
    """A cells_table row's defense (its target's name for scored transcripts), from its label
    ``attack/defense/corpus/...``: the longest known name the label continues with (a URL has
    slashes of its own), else the label's second field."""
    rest = str(cell.get("label", "")).split("/", 1)[-1]
    known = [n for n in named if rest.startswith(n + "/")]
    return max(known, key=len) if known else rest.split("/", 1)[0]


def _gate_names(gate: dict[str, Any], target: str) -> bool:
    """Whether a failed gate concerns ``target``: a cell of it tripped the gate, or the gate failed
    on the run as a whole (incomplete evidence, nothing to check)."""
    tripped = gate.get("tripped") or []
    if gate.get("incomplete") or not tripped:
        return True
    return any(_target_of(t, {target}) == target for t in tripped if isinstance(t, dict))


def endpoint_targets(summary: dict[str, Any]) -> set[str]:
    """The defenses that stand for an endpoint (their cells' labels end ``@target``): the service's
    own defense, which ragleak neither audits nor holds to a guarantee."""
    named = {r["defense"] for r in summary.get("levels") or []} | {r["defense"] for r in summary.get("table_one") or []}
    return {_target_of(c, named) for c in summary.get("cells_table") or [] if "@" in str(c.get("label", ""))}


def has_baseline(summary: dict[str, Any]) -> bool:
    return bool(summary.get("deltas")) or any(r.get("defense") == BASELINE for r in summary.get("levels") or [])
