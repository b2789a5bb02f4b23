"""Each DP defense's claim next to the evidence against it: the claimed eps(T) for the run's query
count, (a) the ``ragleak verify`` lower bound when a verify report sits in the run folder, and
(b) the lower bound the run's own membership attack implies, with the MI TPR ceiling the claim
allows at the attack's false-positive rate.

(b) reads the labelled candidates of every membership transcript of the defense (the candidate
is the trial: members drawn at random from the knowledge base, non-members never indexed, as in
one-run auditing: Steinke, Nasr, Jagielski 2023, arXiv 2305.08846). Each scorer and threshold
"score >= t" is one test; ``bounds.eps_lower_bound`` gives its Clopper-Pearson lower bound with
Bonferroni over every threshold of every scorer and cell of the defense. The attack reads
answers, so it is compared with the claim as seen on answers: a claim that does not cover
answers (retrieved ids only) is void there and cannot be beaten by it.
A claim is beaten when either lower bound exceeds it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ragleak.accounting.bounds import eps_lower_bound, tpr_bound
from ragleak.accounting.composition import epsilon_after
from ragleak.accounting.guarantee import Guarantee
from ragleak.grid.store import MEASURED, CellRecord, RunStore

log = logging.getLogger(__name__)

ALPHA = 0.05
VERIFY_DIR = "verify"


def _threshold_counts(members: np.ndarray, nonmembers: np.ndarray) -> list[tuple[float, int, int]]:
    """(t, true positives, false positives) of the test "score >= t" for every distinct score."""
    return [(float(t), int((members >= t).sum()), int((nonmembers >= t).sum()))
            for t in np.unique(np.concatenate([members, nonmembers]))]


def mi_lower_bound(score_sets: list[tuple[str, list[float], list[float]]], delta: float,
                   alpha: float = ALPHA) -> dict[str, Any] | None:
    """The best eps lower bound over every (scorer, threshold) of ``score_sets``
    [(label, member scores, non-member scores)], Bonferroni over all of them."""
    tests = []
    for label, members, nonmembers in score_sets:
        m, n = np.asarray(members, dtype=float), np.asarray(nonmembers, dtype=float)
        if m.size and n.size:
            tests += [(label, t, tp, fp, m.size, n.size) for t, tp, fp in _threshold_counts(m, n)]
    if not tests:
        return None
    best = None
    for label, t, tp, fp, n_in, n_out in tests:
        lb = eps_lower_bound(fp=fp, n_out=n_out, fn=n_in - tp, n_in=n_in, delta=delta, alpha=alpha,
                             n_thresholds=len(tests))
        # ties (often all 0) go to the threshold that separates the classes best
        if best is None or (lb, tp / n_in - fp / n_out) > (best["eps_lb"], best["tpr"] - best["fpr"]):
            best = {"eps_lb": lb, "scorer": label, "threshold": t, "tpr": tp / n_in, "fpr": fp / n_out,
                    "members": n_in, "nonmembers": n_out}
    assert best is not None
    best["thresholds"] = len(tests)
    return best


def _transcript_scores(run_dir: Path, record: CellRecord) -> list[tuple[str, list[float], list[float]]]:
    from ragleak.attacks.base import Transcript

    path = RunStore(run_dir).transcript_path(record.cell_id)
    if not path.exists():
        return []
    try:
        transcript = Transcript.from_json(path.read_text(encoding="utf-8"))
    except (ValueError, ValidationError) as exc:
        log.warning("cannot read transcript %s: %s", path, exc)
        return []
    labelled = [m for m in transcript.membership if m.member is not None and m.scores]
    scorers = sorted({s for m in labelled for s in m.scores})
    return [(s, [m.scores[s] for m in labelled if m.member and s in m.scores],
             [m.scores[s] for m in labelled if not m.member and s in m.scores]) for s in scorers]


def _effective_params(record: CellRecord) -> dict[str, Any] | None:
    from ragleak.defenses import DEFENSES

    try:
        return DEFENSES.get(record.spec.defense)(**record.spec.defense_kwargs()).params.model_dump(mode="json")
    except Exception as exc:  # a defense this ragleak cannot build: no verify report can match it
        log.warning("cannot rebuild defense %s: %s", record.spec.defense, exc)
        return None


def verify_reports(run_dir: Path) -> list[Any]:
    """The ``ragleak verify`` reports in RUN_DIR/verify/*.json (``ragleak verify D --json RUN/verify/D.json``)."""
    from ragleak.verify import VerifyReport

    out = []
    for path in sorted((Path(run_dir) / VERIFY_DIR).glob("*.json")):
        try:
            out.append((path.name, VerifyReport.model_validate_json(path.read_text(encoding="utf-8"))))
        except (ValueError, ValidationError) as exc:
            log.warning("not a verify report: %s (%s)", path, exc)
    return out


def privacy_checks(run_dir: Path, records: list[CellRecord]) -> list[dict[str, Any]]:
    """One row per (defense, parameters) with a formal guarantee among the measured cells."""
    groups: dict[tuple, list[CellRecord]] = defaultdict(list)
    for r in records:
        if r.status in MEASURED and r.guarantee and Guarantee.model_validate(r.guarantee).is_formal:
            groups[(r.spec.defense, repr(r.guarantee))].append(r)
    reports = verify_reports(run_dir)
    rows = []
    for (defense, _), cells in sorted(groups.items(), key=lambda kv: kv[0]):
        g = Guarantee.model_validate(cells[0].guarantee)
        queries = max((r.counts.queries for r in cells if r.counts is not None), default=0)
        claim = epsilon_after(g, queries, shown="answers")
        params = _effective_params(cells[0])
        row: dict[str, Any] = {
            "defense": defense, "epsilon_setting": None if cells[0].spec.applied_epsilon is None else
            f"{cells[0].spec.epsilon_param}={cells[0].spec.applied_epsilon:g}", "queries": queries,
            "claim_eps": claim.eps, "claim_delta": claim.delta, "claim_void": claim.void, "claim_reason": claim.reason,
            "claim_own_boundary": epsilon_after(g, queries).eps, "boundary": g.boundary}
        matching = [(name, rep) for name, rep in reports if rep.defense == defense and rep.params == params]
        row["verify"] = None
        if matching:
            name, rep = max(matching, key=lambda nr: nr[1].max_eps_lb)
            ran = [s for s in rep.scenarios if s.applicable and s.claim is not None]
            worst = max(ran, key=lambda s: s.max_eps_lb - s.claim.eps, default=None)
            row["verify"] = {"file": f"{VERIFY_DIR}/{name}", "max_eps_lb": rep.max_eps_lb, "violated": rep.violated,
                             "trials": rep.trials, "violations": rep.violations,
                             "scenario": worst.name if worst else None,
                             "scenario_claim_eps": worst.claim.eps if worst else None,
                             "scenario_eps_lb": worst.max_eps_lb if worst else None}
        score_sets = {r.cell_id: _transcript_scores(run_dir, r) for r in cells}
        mi = mi_lower_bound([s for sets in score_sets.values() for s in sets], delta=0.0 if claim.void else claim.delta)
        if mi is not None:
            mi["cells"] = sum(bool(sets) for sets in score_sets.values())
        if mi is not None and not claim.void:
            mi["tpr_ceiling"] = tpr_bound(mi["fpr"], claim.eps, min(1.0, claim.delta))
        row["mi"] = mi
        beaten_by_mi = bool(mi and not claim.void and mi["eps_lb"] > claim.eps)
        row["beaten"] = beaten_by_mi or bool(row["verify"] and row["verify"]["violated"])
        row["beaten_by"] = [name for name, hit in (("membership attack", beaten_by_mi),
                                                   ("verify", bool(row["verify"] and row["verify"]["violated"])))
                            if hit]
        rows.append(row)
    return rows
