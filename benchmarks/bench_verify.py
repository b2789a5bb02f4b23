"""`ragleak verify`: does it catch broken mechanisms, and what does it say about the real ones?
JSON on stdout (and in --out).

* ``broken``: every copy in tests/verify/broken_copies.py (half noise, 0.8x noise, truncated
  pool, passage noise under a document claim, every voter reads every document, ca-dp that never
  refuses), loaded as a file defense (``path.py:Class``, as ``ragleak verify`` takes it) and
  verified at the DEFAULT settings (``VerifySettings()``: 10,000 trials per world at most,
  sequential looks, 600 s budget); the half-noise copy also at the suite's CI budget
  (``tests/verify/test_verify_verdicts.CI``). Per copy: verdict, the line, trials per world used
  in the deciding scenario, wall and CPU seconds (one process, one core, FAISS on one thread; on
  a shared machine the CPU seconds are the one-core cost, the wall seconds include waiting).
* ``defaults`` (``--defaults all`` or names): registered DP defenses at their defaults, same
  settings.
* ``--power COPY --seeds N``: the power of the default settings on one copy: its verdict at
  verify seeds 0..N-1 (``VerifySettings.seed``), with CPU seconds each, the catch rate and its
  Clopper-Pearson 95% interval; and the false-alarm side, the correct defense the copy is a copy
  of (its registered parent class), at the same seeds: never broken is what must hold.

    .venv/bin/python benchmarks/bench_verify.py [--copies A,B|none] [--defaults all|a,b] [--trials N]
        [--max-seconds S] [--out FILE]
    .venv/bin/python benchmarks/bench_verify.py --power EightTenthsNoise --seeds 8 [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIES_FILE = ROOT / "tests" / "verify" / "broken_copies.py"


def _run(defense, settings) -> dict:
    from ragleak.verify import Verdict, verify_defense

    t0, c0 = time.perf_counter(), time.process_time()
    report = verify_defense(defense, settings=settings)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    deciding = next((s for s in report.scenarios if s.verdict is report.verdict), None)
    return {"verdict": report.verdict.value, "exit_code": report.exit_code, "line": report.line,
            "deciding_scenario": deciding.name if deciding else None,
            "trials_per_world": deciding.trials if deciding else 0,
            "trials_run_per_world_all_scenarios": sum(s.trials for s in report.scenarios),
            "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "max_eps_lb": round(report.max_eps_lb, 3),
            "broken": report.verdict is Verdict.broken,
            "scenarios": [f"{s.name}: {s.verdict.value if s.verdict else 'n/a'} at {s.trials} trials, "
                          f"eps_lb {s.max_eps_lb:.3f}" for s in report.scenarios]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", default=None,
                    help="comma-separated class names in broken_copies.py (default: all; 'none': skip them)")
    ap.add_argument("--defaults", default=None,
                    help="also verify registered DP defenses at their defaults: 'all' or comma-separated names")
    ap.add_argument("--trials", type=int, default=None, help="override the default most trials per world")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="override the default wall-clock budget (on a shared machine wall time is not one core's)")
    ap.add_argument("--power", default=None, help="a class name in broken_copies.py: its catch rate over --seeds")
    ap.add_argument("--seeds", type=int, default=8, help="verify seeds for --power (0..N-1)")
    ap.add_argument("--no-baseline", action="store_true", help="--power without the correct defense's runs")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from ragleak.defenses import DEFENSES, make_defense
    from ragleak.defenses.loader import defense_class
    from ragleak.verify import VerifySettings

    sys.path.insert(0, str(ROOT / "tests" / "verify"))
    from test_verify_verdicts import CI  # the suite's budget  # noqa: E402

    names = ([c.strip() for c in args.copies.split(",") if c.strip() and c.strip() != "none"] if args.copies else
             ["TruncatedPool", "EveryVoterReadsAll", "HalfNoise", "PassageNoise", "NeverRefuses", "EightTenthsNoise"])
    overrides = {k: v for k, v in (("trials", args.trials), ("max_seconds", args.max_seconds)) if v is not None}
    settings = VerifySettings(**overrides)
    if args.power:
        _power(args.power, args.seeds, overrides, not args.no_baseline, args.out)
        return
    report: dict = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count(),
                    "note": "2 shared cores, other work running: timings are noisy (one process, FAISS 1 thread)"},
        "settings": {"trials": settings.trials, "looks": settings.looks(), "alpha": settings.alpha,
                     "max_seconds": settings.max_seconds, "adjacencies": settings.adjacencies},
        "ci_settings": {"trials": CI.trials, "looks": CI.looks(), "stresses": list(CI.stresses)},
        "broken": {}, "defaults": {}}
    for name in names:
        cls = defense_class(f"{COPIES_FILE}:{name}")
        report["broken"][name] = _run(cls, settings)
        print(f"{name}: {report['broken'][name]['verdict']} in {report['broken'][name]['seconds']}s",
              file=sys.stderr, flush=True)
        if name == "HalfNoise":
            report["broken"]["HalfNoise@CI"] = _run(cls, CI)
        _write(args.out, report)  # after each copy: a long run keeps what it measured
    if args.defaults:
        chosen = (DEFENSES.names() if args.defaults == "all" else [d.strip() for d in args.defaults.split(",")])
        for name in chosen:
            if make_defense(name).guarantee().is_formal:
                report["defaults"][name] = _run(name, settings)
                print(f"{name}: {report['defaults'][name]['verdict']}", file=sys.stderr, flush=True)
                _write(args.out, report)
    _write(args.out, report)
    print(json.dumps(report, indent=2))


def _machine() -> dict:
    return {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "note": "2 shared cores, other work running: timings are noisy (one process, FAISS 1 thread); "
                    "cpu_seconds is this process's CPU time, the one-core cost"}


def _power(copy: str, seeds: int, overrides: dict, baseline: bool, out: Path | None) -> None:
    """The copy's verdict at verify seeds 0..seeds-1, and the correct parent defense's."""
    from dataclasses import asdict

    from ragleak.accounting.bounds import cp_lower, cp_upper
    from ragleak.defenses.loader import defense_class
    from ragleak.verify import VerifySettings

    cls = defense_class(f"{COPIES_FILE}:{copy}")
    parent = next(c for c in cls.__mro__[1:] if getattr(c, "name", None) and c.__module__.startswith("ragleak."))
    report: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": _machine(),
                    "command": "benchmarks/bench_verify.py " + " ".join(sys.argv[1:]),
                    "copy": copy, "copy_doc": (cls.__doc__ or "").strip(), "correct": parent.name,
                    "settings": json.loads(json.dumps({k: v for k, v in asdict(VerifySettings(**overrides)).items()
                                                        if k != "seed"})),
                    "looks": VerifySettings(**overrides).looks(), "runs": {copy: [], parent.name: []}}
    if out is not None and out.exists():
        # resume: keep the seeds an earlier run of the same measurement finished
        earlier = json.loads(out.read_text(encoding="utf-8"))
        if earlier.get("copy") == copy and earlier.get("settings") == report["settings"]:
            report["runs"] = earlier["runs"]
            report["resumed"] = sorted({earlier.get("date", ""), *earlier.get("resumed", [])})

    def summary() -> None:
        runs = report["runs"][copy]
        n, k = len(runs), sum(r["broken"] for r in runs)
        report["catch"] = {"caught": k, "seeds": n, "rate": k / n if n else None,
                           "clopper_pearson_95": [round(cp_lower(k, n, 0.025), 3), round(cp_upper(k, n, 0.025), 3)]
                           if n else None,
                           "max_cpu_seconds": max((r["cpu_seconds"] for r in runs), default=None)}
        correct = report["runs"][parent.name]
        report["false_alarm"] = {"broken": sum(r["broken"] for r in correct), "seeds": len(correct),
                                 "verdicts": [r["verdict"] for r in correct],
                                 "max_cpu_seconds": max((r["cpu_seconds"] for r in correct), default=None)}

    # every seed of the copy first, then the correct defense's (a run cut short keeps the copy's)
    for name, defense in ((copy, cls), (parent.name, parent.name))[:2 if baseline else 1]:
        for seed in range(seeds):
            if any(r["seed"] == seed for r in report["runs"][name]):
                continue
            row = {"seed": seed, **_run(defense, VerifySettings(**overrides, seed=seed))}
            report["runs"][name].append(row)
            print(f"{name} seed {seed}: {row['verdict']} ({row['cpu_seconds']} CPU-s, "
                  f"{row['trials_per_world']} trials)", file=sys.stderr, flush=True)
            summary()
            _write(out, report)
    print(json.dumps(report, indent=2))


def _write(path: Path | None, report: dict) -> None:
    if path is not None:
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
