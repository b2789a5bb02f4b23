"""What ``ragleak audit TARGET --probe stack`` costs (issue 38), one JSON line per target on stdout.

Each TARGET (a registered defense name or a ``.py`` file of defenses) runs through the CLI in a
subprocess, ``--json``: the line carries the command, the probe's own cost record (model
generations, generation-cache hits, answers generated, stand-ins, answers never needed, the
determinism check), the wall and CPU seconds of the whole command (model load, embedding and
import included), the threads, and per defense class its verdicts and whether it passes
``--strict``. ``--registered`` adds one line for every registered defense audited on one probe in
this process (as a file of those defenses would be: one memo, one model load).

Timings depend on the machine's load: the line records the load average before and after, and
how many cores this process may use; compare lines taken under the same load only.

    .venv/bin/python benchmarks/bench_audit_stack.py [TARGET ...] [--registered] [--types T,..] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _summary(defenses: list[dict]) -> dict:
    verdicts = {d["cls"]: {h["hook"]: h["verdict"] for h in d["hooks"] if h["overridden"] or h["declared"]}
                for d in defenses}
    return {"classes": len(defenses), "strict_pass": sum(not d["problems"] for d in defenses),
            "verdicts": verdicts}


def _machine() -> dict:
    return {"load_avg": [round(x, 2) for x in os.getloadavg()], "cores": len(os.sched_getaffinity(0)),
            "threads": os.environ.get("RAGLEAK_THREADS", "all cores"), "python": platform.python_version()}


def bench_cli(target: str, types: str | None) -> dict:
    """``ragleak audit TARGET --probe stack --json`` in a subprocess: its cost and verdicts."""
    command = [str(ROOT / ".venv" / "bin" / "ragleak"), "audit", target, "--probe", "stack", "--json"]
    if types:
        command += ["--probe-types", types]
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    load_before = _machine()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row: dict = {"command": " ".join(["ragleak", *command[1:]]), "target": target, "exit_code": done.returncode,
                 "wall_s": round(time.perf_counter() - start, 1),
                 "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
                 "machine_before": load_before, "machine_after": _machine()}
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {**row, "error": done.stderr.strip().splitlines()[-1:] or done.stdout[-500:]}
    return {**row, "cost": data["cost"], **_summary(data["defenses"])}


def bench_registered(types: str | None) -> dict:
    """Every registered defense audited on one stack probe in this process (one memo, one model)."""
    from ragleak.audit.effect import audit_class
    from ragleak.audit.inventory import load_registered
    from ragleak.audit.probe import build_probe, select_inputs
    from ragleak.defenses import DEFENSES

    load_before = _machine()
    wall, cpu = time.perf_counter(), time.process_time()
    probe = build_probe("stack", inputs=select_inputs(types.split(",")) if types else None)
    try:
        audits = [audit_class(probe, load_registered(DEFENSES, name)) for name in DEFENSES.names()]
    finally:
        probe.close()
    return {"command": "every registered defense on one --probe stack (in process)", "target": "registered",
            "wall_s": round(time.perf_counter() - wall, 1), "cpu_s": round(time.process_time() - cpu, 1),
            "machine_before": load_before, "machine_after": _machine(), "cost": probe.cost().model_dump(mode="json"),
            **_summary([a.model_dump(mode="json") for a in audits])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="registered defense names or .py files of defenses")
    parser.add_argument("--registered", action="store_true", help="also every registered defense on one probe")
    parser.add_argument("--types", default=None, help="--probe-types for every run (default: every type)")
    parser.add_argument("--out", type=Path, default=None, help="append the lines to this file too")
    args = parser.parse_args()
    runs = [lambda t=t: bench_cli(t, args.types) for t in args.targets]
    if args.registered:
        runs.append(lambda: bench_registered(args.types))
    for run in runs:  # each line as soon as it is measured
        row = run()
        line = json.dumps({"benchmark": "audit-probe-stack", "note": "timings on a shared machine: noisy", **row})
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if args.out is not None:
            with args.out.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")


if __name__ == "__main__":
    main()
