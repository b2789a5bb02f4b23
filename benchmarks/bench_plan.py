"""Does the dry run's plan hold? Predicted model calls and ETA against a real run of the same grid.

Runs a small real grid (PS and MI on synthetic-corp, no defense and dp-retrieval, the default
model, one worker, one llama.cpp thread) and compares what ``plan_summary`` predicted before the
run with what the run measured:

* model calls: the plan's count against the cell records' ``model_calls``;
* time: the plan's expected ETA and its upper bound against the run's generation time, what the
  ETA prices (the cells' ``timings.generation_s``, the target's generate hook, plus the model time
  of the other roles, ``attacker_model_s`` and ``standard_model_s``: an agent attack's own calls;
  until 2026-12-06 only the hook was counted, which made agent attacks' ETAs look 1.2-1.3x high),
  and its wall time, as ratios;
* the ETA today's formula gave (every prompt ``1.35 x top_k x chunk_words + 100`` tokens, every
  answer ``max_tokens``), on the same rates, for comparison.

The rates are measured in this process just before the run (and again after it: the machine is
shared, so both are reported); the prediction uses the first. The expected ETA uses the stored
completion table (measured on other attacks' runs on synthetic-email: out of sample here) and,
separately, the run's own observations (``--observe``: in sample, the estimator's best case).

    PYTHONPATH=src RAGLEAK_THREADS=1 nice -n 15 .venv/bin/python benchmarks/bench_plan.py [--budget 4] \\
        [--attacks ps,mi] [--defenses none,dp-retrieval] [--corpus synthetic-corp --docs 30] [--modes single] \\
        [--epsilons 1.0] [--mi '{"n_members": 5, "n_nonmembers": 15}'] [--keep-run DIR]

``--keep-run`` keeps the run folder, so that ``benchmarks/plan_completions.py --observe-only
--run-dir DIR --keep-shipped`` can merge what it observed into the shipped table.

``--budget 0`` runs each attack at its default budget, the paper grid's setting, where an agent
attack may end on its own long before it (IKEA: 8-13 of 256 queries on the paper's corpora under
greedy decoding), which a small budget never shows.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from datetime import date
from pathlib import Path

from ragleak.grid import plan as plan_module
from ragleak.grid.completions import observe
from ragleak.grid.plan import plan_summary
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import GENERAL_POOL, grid_from_dict
from ragleak.rag.models import DEFAULT_MODEL
from ragleak.rag.speed import measure_speed

OUT = Path(__file__).resolve().parent / "results" / f"bench_plan-{date.today().isoformat()}.json"


def config(budget: int, attacks: list[str], defenses: list[str], corpus: str = "synthetic-corp", docs: int = 30,
           modes: list[str] | None = None, epsilons: list[float] | None = None, mi: dict | None = None):
    """The checked grid; ``budget`` 0: each attack's own default (where an attack may end on its own);
    ``mi``: MI's candidates (default: 2 members, 2 non-members, 8 probes)."""
    return grid_from_dict({
        # the name says what ran: plan_completions.py names a kept run's rows by it
        "name": (f"bench-plan: {','.join(attacks)} under {','.join(defenses)} on {corpus} ({docs} docs, eps "
                 f"{','.join(f'{e:g}' for e in epsilons or [1.0])}, budget {budget or 'default'})"),
        "attacks": attacks, "defenses": defenses,
        "corpora": [corpus], "modes": modes or ["single"], "epsilons": epsilons or [1.0], "audit": "off",
        **({"budget": budget} if budget else {}),
        "attack_params": {a: params for a, params in (("ps", GENERAL_POOL),
                                                      ("mi", mi or {"n_members": 2, "n_nonmembers": 2, "kb_size": 10}))
                          if a in attacks},
        "corpus_params": {corpus: {"n_docs": docs}},
        "stack": {"n_threads": 1},
    })


def old_eta(plan: dict, grid, speed: dict) -> float:
    """Today's formula before this change: a guessed prompt length, every answer at max_tokens."""
    s = grid.stack
    prompt = 1.35 * s.top_k * s.chunk_words + 100
    return plan["generations"] * (prompt / speed["prefill_tok_s"] + s.decoding.max_tokens / speed["decode_tok_s"])


def predict(grid, speed: dict, completions=None) -> dict:
    original = plan_module.stored_speed
    plan_module.stored_speed = lambda model, threads=1, copies=1: speed  # this run's rates, not the home's file
    try:
        return plan_summary(grid, completions=completions)
    finally:
        plan_module.stored_speed = original


def model_time(cell: dict) -> float:
    """The generation time the ETA prices, of one cell record: the target pipeline's ``generate``
    hook (its model calls, or a voting defense's decoding) and the model time of every other role
    (an agent attack's own calls, a plain-LLM comparison), which the hook does not see."""
    timings = cell.get("timings") or {}
    others = sum(v for k, v in timings.items() if k.endswith("_model_s") and k != "target_model_s")
    return (timings.get("generation_s") or 0.0) + others


def by_defense(grid, defense: str, speed: dict, cells: list[dict]) -> dict:
    alone = grid.model_copy(update={"defenses": [defense]})
    plan = predict(alone, speed)
    generation_s = sum(model_time(c) for c in cells if c["spec"]["defense"] == defense)
    return {"eta_expected_s": plan["eta_s"], "eta_upper_s": plan["eta_upper_s"], "generation_s": round(generation_s, 1),
            "expected_over_generation_s": round(plan["eta_s"] / generation_s, 3) if generation_s else None,
            "upper_over_generation_s": round(plan["eta_upper_s"] / generation_s, 3) if generation_s else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=4, help="queries per cell; 0: each attack's default budget")
    ap.add_argument("--corpus", default="synthetic-corp")
    ap.add_argument("--docs", type=int, default=30, help="the corpus's n_docs")
    ap.add_argument("--modes", default="single")
    ap.add_argument("--epsilons", default="1.0", help="the grid's epsilon axis (ca-dp at 1,5: its bare tail is shared)")
    ap.add_argument("--attacks", default="ps,mi")
    ap.add_argument("--defenses", default="none,dp-retrieval",
                    help="e.g. none,private-rag,dp-vote: checks the pricing of voting defenses' answers")
    ap.add_argument("--mi", type=json.loads, default=None,
                    help='MI\'s candidates as JSON, e.g. \'{"n_members": 5, "n_nonmembers": 15, "kb_size": 20}\'')
    ap.add_argument("--keep-run", type=Path, default=None,
                    help="run in this (new) folder and keep it, for benchmarks/plan_completions.py --observe-only --run-dir")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    grid = config(args.budget, args.attacks.split(","), args.defenses.split(","), args.corpus, args.docs,
                  args.modes.split(","), [float(e) for e in args.epsilons.split(",")], args.mi)
    if args.keep_run is not None and args.keep_run.exists():
        raise SystemExit(f"{args.keep_run} exists: --keep-run wants a new folder (a run there would resume it)")
    before = measure_speed(DEFAULT_MODEL, n_threads=1)
    t0 = time.perf_counter()
    plan = predict(grid, before)
    plan_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.keep_run or Path(tmp) / "run"
        t0 = time.perf_counter()
        state = run_grid(grid, run_dir, workers=1)
        wall = time.perf_counter() - t0
        cells = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((run_dir / "cells").glob("*.json"))]
        observed = observe(run_dir)
        in_sample = predict(grid, before, completions=observed)
    after = measure_speed(DEFAULT_MODEL, n_threads=1)
    generation_s = sum(model_time(c) for c in cells)
    target_hook_s = sum(c["timings"].get("generation_s") or 0.0 for c in cells)
    measured_calls = sum(c["model_calls"] for c in cells)
    legacy = old_eta(plan, grid, before)

    def ratios(p: dict) -> dict:
        return {"eta_expected_s": p["eta_s"], "eta_upper_s": p["eta_upper_s"],
                "expected_over_generation_s": round(p["eta_s"] / generation_s, 3),
                "upper_over_generation_s": round(p["eta_upper_s"] / generation_s, 3),
                "expected_over_wall_s": round(p["eta_s"] / wall, 3)}

    report = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "grid": {"attacks": grid.attacks, "defenses": grid.defenses, "corpora": grid.corpora, "modes": grid.modes,
                 "epsilons": grid.epsilons, "corpus_params": grid.corpus_params, "budget": args.budget or "attack defaults",
                 "queries_sent": sum((c.get("counts") or {}).get("queries", 0) for c in cells),
                 "model": grid.stack.model, "threads": 1, "workers": 1},
        "rates": {"before": before, "after": after},
        "run": {"cells": state.total, "errors": state.errors, "failed": state.failed, "wall_s": round(wall, 1),
                "generation_s": round(generation_s, 1), "target_generate_hook_s": round(target_hook_s, 1),
                "model_calls": measured_calls,
                "cache_hits": state.cache_hits, "observed": observed.to_json()},
        "plan": {"seconds": round(plan_s, 2), "streams": plan["distinct_generation_streams"],
                 "model_calls": plan["model_calls"], "prompt_tokens": plan["eta_basis"]["prompt_tokens"],
                 "completions": plan["eta_basis"]["completions"]},
        "model_calls_ratio": round(plan["model_calls"] / measured_calls, 3) if measured_calls else None,
        # the calls the expected ETA prices (observed share of the budget sent, observed agent calls)
        "model_calls_expected_ratio": round(plan["model_calls_expected"] / measured_calls, 3) if measured_calls else None,
        "stored_table": ratios(plan),
        "observed_in_sample": ratios(in_sample),
        "old_formula": {"eta_s": round(legacy), "over_generation_s": round(legacy / generation_s, 3)},
        # per defense: the plan of that defense's cells alone against their generation time
        # (a voting defense's answers are priced by its VotingShape, not as plain generations)
        "by_defense": {d: by_defense(grid, d, before, cells) for d in grid.defenses},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
