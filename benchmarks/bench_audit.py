"""Accuracy of the active-path audit on the red-team corpora, as JSON on stdout.

Two designs are scored on every corpus:

* the **static + trace** audit (``ragleak audit FILE [--run DIR]``): the static dataflow verdict
  (by importing the class, and by reading the file without importing it), the model-free trace of
  ``tests/audit/redteam_probe.py`` and ``verdict.combine`` of the two;
* the **audit by effect** (``ragleak audit FILE --probe scripted``, issue 38): per hook what changes
  on retrieval, prompt and answer against the identity hook on paired probes; "combined" is the
  measured verdict, or - only where the probe could not run the hook - the static status (as
  ``--strict`` reads it).

Corpora: ``redteam`` (86 forms) and ``redteam_holdout`` (21), written for the static audit;
``redteam_effect_pre`` (written before the audit by effect), ``redteam_effect_post`` (written
after it, to attack it) and ``redteam_effect_post2`` (written after the state-across-calls and
query-form changes were planned, before they were measured on it). Also: whether every registered defense passes ``--strict`` both ways, and
with ``--stack FILE`` the wall time of ``ragleak audit FILE --probe stack`` (the packaged LLM).

    .venv/bin/python benchmarks/bench_audit.py [--out FILE] [--stack FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ON_PATH = {"active", "pattern-limited"}


# Rows of the older corpora whose label predates issue 38's definition: a change that reaches no
# channel (retrieval top-k and order, prompt, answer) is inactive. Scored both ways.
EFFECT_DEFINITION = {
    ("redteam", "SliceAssignClip", "score_retrieval"): "clips scores to 0.05: the stable sort keeps the score order, "
                                                       "the top-k and its order are unchanged",
    ("redteam", "PopLast", "score_retrieval"): "drops the last candidate: a pool cap above top-k",
    ("redteam", "SetattrScores", "score_retrieval"): "rounds and shifts every score: monotone, the top-k is unchanged",
    ("redteam", "FlattenScores", "score_retrieval"): "sets every score to 1.0: the stable sort keeps the order",
}


def _stub(row: dict) -> bool:
    return bool(row.get("stub", row["expected"] == "inactive"))


def _score(rows: list[dict], verdict_key: str) -> dict:
    n = len(rows)
    pattern = [r for r in rows if r["expected"] == "pattern-limited"]
    return {
        "right": sum(r[verdict_key] == r["expected"] for r in rows), "of": n,
        "accuracy": round(sum(r[verdict_key] == r["expected"] for r in rows) / n, 4),
        "stubs_called_active": sum(_stub(r) and r[verdict_key] in ON_PATH for r in rows),
        "pattern_limited_recognised": f"{sum(r[verdict_key] == 'pattern-limited' for r in pattern)}/{len(pattern)}",
    }


def _static_trace(name: str) -> dict:
    from redteam_probe import evaluate

    t0 = time.perf_counter()
    out: dict = {}
    for route in ("class", "file"):
        try:
            rows = evaluate(route, name)
        except Exception as exc:  # the file route of a corpus the static side cannot read: recorded
            out[route] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        for r in rows:
            r["trace_only"] = "inactive" if r["dynamic"]["releases"] or not r["dynamic"]["changed"] else "active"
        labelled = [dict(r) for r in rows]
        for r in rows:  # scored by issue 38's definition, as the audit by effect is
            if (name, r["cls"], r["hook"]) in EFFECT_DEFINITION:
                r["expected"] = "inactive"
        out[route] = {"static": _score(rows, "static"), "trace_only": _score(rows, "trace_only"),
                      "combined": _score(rows, "combined"),
                      "combined_as_originally_labelled": _score(labelled, "combined")}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _by_effect(name: str, probe) -> dict:
    from redteam_probe import FIXTURES, SETS

    from ragleak.audit.effect import audit_class
    from ragleak.audit.runtime import defense_classes

    t0 = time.perf_counter()
    rows = json.loads((FIXTURES / SETS[name]).read_text(encoding="utf-8"))["hooks"]
    classes = {c.__name__: c for c in defense_classes(FIXTURES / f"{name}.py")[0]}
    audits: dict = {}
    out_rows = []
    for row in rows:
        if row["cls"] not in audits:
            audits[row["cls"]] = audit_class(probe, classes[row["cls"]])
        cell = next(h for h in audits[row["cls"]].hooks if h.hook == row["hook"])
        static = cell.static.status if cell.static else "undetermined"
        combined = static if cell.unexercised and static in ON_PATH else cell.verdict
        labelled = "inactive" if row.get("releases_context") else row["expected"]
        expected = "inactive" if (name, row["cls"], row["hook"]) in EFFECT_DEFINITION else labelled
        out_rows.append({"cls": row["cls"], "hook": row["hook"], "expected": expected, "labelled": labelled,
                         "stub": _stub(row),
                         "probe": cell.verdict, "static": static, "combined": combined, "triggers": cell.triggers,
                         "agreement": cell.agreement, "reason": cell.reason})
    as_labelled = [{**r, "expected": r["labelled"]} for r in out_rows]
    return {
        "probe": _score(out_rows, "probe"), "static": _score(out_rows, "static"),
        "combined": _score(out_rows, "combined"),
        "relabelled_by_issue_38_definition": {f"{c}.{h}": why for (n, c, h), why in EFFECT_DEFINITION.items()
                                              if n == name},
        "combined_as_originally_labelled": _score(as_labelled, "combined"),
        "disagreements_static_vs_measured": sum(r["static"] != r["probe"] for r in out_rows),
        "mistakes": [{k: r[k] for k in ("cls", "hook", "expected", "combined", "static", "reason")}
                     for r in out_rows if r["combined"] != r["expected"]],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _registered(probe) -> dict:
    from typer.testing import CliRunner

    from ragleak.audit.effect import audit_class
    from ragleak.audit.runtime import defense_classes
    from ragleak.cli import app
    from ragleak.defenses import DEFENSES

    out = {}
    for name in DEFENSES.names():
        static = CliRunner().invoke(app, ["audit", name, "--strict", "--json"])
        t0 = time.perf_counter()
        (cls,), _ = defense_classes(name)
        audit = audit_class(probe, cls)
        out[name] = {"static_strict_passes": static.exit_code == 0,
                     "probe_strict_passes": not audit.problems, "probe_problems": audit.problems,
                     "declared": {r.hook: r.verdict + (f" ({', '.join(r.triggers)})" if r.verdict == "pattern-limited"
                                                       else "") for r in audit.hooks if r.declared},
                     "unexercised": [r.hook for r in audit.hooks if r.unexercised],
                     "probe_seconds": round(time.perf_counter() - t0, 1)}
    return out


def _stack(path: str) -> dict:
    t0 = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "ragleak.cli", "audit", path, "--probe", "stack", "--json"],
                            capture_output=True, text=True, cwd=ROOT)
    seconds = round(time.perf_counter() - t0, 1)
    try:
        data = json.loads(result.stdout)
        verdicts = {f"{d['cls']}.{h['hook']}": h["verdict"] for d in data["defenses"] for h in d["hooks"] if h["overridden"]}
    except json.JSONDecodeError:
        verdicts = {"error": result.stderr[-500:]}
    return {"file": path, "exit_code": result.returncode, "seconds": seconds, "verdicts": verdicts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--stack", default=None, help="a .py file of defenses to time `--probe stack` on")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "audit"))
    logging.disable(logging.WARNING)  # the corpora's logging-only hooks log on every call
    from ragleak.audit.probe import build_probe

    t0 = time.perf_counter()
    probe = build_probe("scripted")
    report: dict = {
        "note": "timings taken on a 2-core machine shared with other jobs: noisy",
        "host": platform.node(), "probe_build_seconds": round(time.perf_counter() - t0, 1),
        "probe_inputs": len(probe.inputs),
        "corpora": {},
    }
    for name in ("redteam", "redteam_holdout", "redteam_effect_pre", "redteam_effect_post", "redteam_effect_post2"):
        report["corpora"][name] = {"static_and_trace": _static_trace(name), "by_effect": _by_effect(name, probe)}
    report["registered_defenses"] = _registered(probe)
    if args.stack:
        report["stack_probe"] = _stack(args.stack)
    effect = {n: c["by_effect"]["combined"] for n, c in report["corpora"].items()}
    report["acceptance"] = {
        "combined_at_least_0.95_per_corpus": {n: e["accuracy"] >= 0.95 for n, e in effect.items()},
        "no_stub_called_active": {n: e["stubs_called_active"] == 0 for n, e in effect.items()},
        "registered_defenses_pass_strict_by_effect": all(
            v["probe_strict_passes"] for v in report["registered_defenses"].values()),
    }
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
