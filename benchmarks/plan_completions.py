"""Measure the completion lengths the dry-run's expected ETA uses, and write them as the table
shipped with the package (``src/ragleak/data/plan/completions.v1.json``).

Runs a small real grid (the paper's attacks with their paper parameters, no defense, the default
model, one thread, small budgets) on synthetic-email, then reads its generation cache with
``grid.completions.observe``. Further run folders (``--also RUN_DIR``) add their observations;
``--observe-only`` reads a run stopped early (its finished cells) without running the rest.

    PYTHONPATH=src RAGLEAK_THREADS=1 nice -n 15 .venv/bin/python benchmarks/plan_completions.py \
        [--budget 4] [--run-dir DIR] [--observe-only] [--also RUN_DIR ...]

The shipped table of 2026-12-04 was made with ``--observe-only`` on this grid stopped after its
IKEA and RAG-Thief cells (a shared machine at load 12 decoded ~0.1 tokens/s), plus the finished
cells of two reproduction runs then in progress (PS on synthetic-corp and synthetic-email under
the paper's six defenses, budget 10; the canary protocol on synthetic-email). ``--keep-shipped``
merges a run's observations into the shipped table by the same rule as runs (most observations
win): the MI rows of 2026-12-05 come from the Table II MI run at the paper's budget
(docs/results/mind-the-hook), and the DEAL, PM and IKEA rows from this grid run whole at
``--budget 8`` the same day (6 cells, 54 model calls, 590 s on one core). RAG-Thief's rows still
rest on 3 target and 1 attacker generation: its queries repeat, so most of its calls were cache
hits. The voting rows (what private-rag's and dp-vote's answers decode) come from ``--voting`` (each
attack under both defenses on synthetic-email, 2026-12-06: PS, PM, MI and IKEA at ``--budget 6``,
then ``--attacks rag-thief,deal``), merged with ``--keep-shipped``; such a run gives voting rows
only (its attacks' answers and agent calls are shaped by the defenses: RAG-Thief reflects on far
fewer answers when nothing leaks). IKEA's rows (2026-12-06) come from a grid of IKEA alone at its
default budget (256) on the paper's three corpora (150 documents each, no defense, single prompts),
read with ``--observe-only --keep-shipped``: it ended on its own after 8, 13 and 12 queries, which
the calls row keeps per corpus (``sent``), so the plan prices IKEA's paper cells there; a run at a
small budget cannot show where an attack ends. The ``bare`` rows (answers to a bare question, a
query ca-dp answers without passages once its budget is spent) come from a grid of MI, RAG-Thief
and PS under ca-dp at eps 1 on synthetic-corp (150 documents, default budgets but PS's 10), read
with ``--observe-only --bare-only --keep-shipped``, which also writes each attack's share of repeated
bare questions there (``AttackCalls.bare_repeat_share``) into its calls row; RAG-Thief's share was
then pooled by hand with the out-of-sample check of 2026-12-07 (``bench_plan.py --budget 0 --attacks
rag-thief --defenses ca-dp --corpus synthetic-email --docs 150``: 119 of its 199 bare questions
repeated, against 140 of 199 on synthetic-corp), since the table keeps a share, not its counts,
and that run's folder was temporary. The ``target_under_defense`` rows (RAG-Thief's and DEAL's answers
under dp-retrieval: 214.5 and 222.0 tokens on average, against 112.8 and 137.4 under no defense)
were written by hand from ``bench_plan.py --budget 0 --attacks rag-thief`` (then ``--attacks
deal``) ``--defenses dp-retrieval --corpus synthetic-corp --docs 150`` (2026-12-07; their run
folders are temporary too; ``observe`` keeps such rows since that day, and ``--keep-shipped``
merges them like the others; ``--under-only`` reads a kept run's, e.g. ``bench_plan.py --keep-run``).
DEAL's row under lprag (229.7 tokens on average, 85% at the cap) was written by hand the same way
from ``bench_plan-2026-12-07-deal-lprag.json`` (run before ``--keep-run`` existed). MI's rows under
dp-retrieval and lprag (38.0 and 35.3 tokens on average, 40 answers each, against 81.7 pooled) come
from ``bench_plan.py --budget 0 --attacks mi --defenses dp-retrieval,lprag --corpus synthetic-corp
--docs 150 --mi '{"n_members": 5, "n_nonmembers": 15, "kb_size": 50}' --keep-run DIR``, read with
``--observe-only --under-only --keep-shipped --run-dir DIR`` (2026-12-07; the rows' ``from`` then
edited to name the benchmark's JSON, since the grid's name did not yet say what ran); RAG-Thief's
row under lprag (135.9 tokens on average, 89 answers) the same way from ``--attacks rag-thief
--defenses lprag`` (``bench_plan-2026-12-07-rag-thief-lprag.json``). DEAL's two rows pool by hand
its eps-1 runs with one at eps 5 (``--epsilons 5 --defenses dp-retrieval,lprag``,
``bench_plan-2026-12-07-deal-eps5.json``: 199.9 and 209.7 tokens on average, 40 answers each): the
paper grid runs both epsilons, and the table keeps no epsilon. RAG-Thief's two rows pool its eps-1
runs the same way with ``--epsilons 5`` runs (under dp-retrieval 186.3 tokens on average, 200
answers; under lprag 142.4, 100 answers: ``bench_plan-2026-12-07-rag-thief-dp-retrieval-eps5.json``,
``-rag-thief-lprag-eps5.json``); where the two answer medians differ (lprag: 115 and 116.5) the
row's median is their n-weighted mean.
DEAL's ``attacker`` row (its optimizer's calls,
which decode at the target's cap of 256 but sample at temperature 0.7, so only the settings tell
them apart) comes from the same agents run re-read with ``--observe-only --keep-shipped`` once
``observe`` attributed such calls (2026-12-06); its 24 entries were left out of the shipped
``unattributed`` count by hand, since that count adds up every run read and this run's first
reading had counted them.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from ragleak.grid.completions import TABLE, CompletionTable, observe
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import GENERAL_POOL, grid_from_dict

OUT = Path(__file__).resolve().parents[1] / "src" / "ragleak" / "data" / "plan" / TABLE


def config(budget: int):
    return grid_from_dict({
        "name": "plan-completions", "attacks": ["ps", "pm", "mi", "ikea", "rag-thief", "deal"], "defenses": ["none"],
        "corpora": ["synthetic-email"], "modes": ["single"], "epsilons": [1.0], "budget": budget, "audit": "off",
        "attack_params": {"ps": GENERAL_POOL, "pm": GENERAL_POOL,
                          "deal": {"seed_pool": "shared-extraction", "seed_pool_version": "2"},
                          "mi": {"n_members": 2, "n_nonmembers": 2, "kb_size": 20}},
        "corpus_params": {"synthetic-email": {"n_docs": 60}},
    })


VOTING_ATTACKS = ("ps", "pm", "mi", "ikea", "rag-thief", "deal")


def voting_config(budget: int, attacks=VOTING_ATTACKS):
    """The voting defenses' answers (``VotingStats``): the attacks under private-rag and dp-vote
    at their default parameters on the same corpus."""
    return grid_from_dict({
        "name": "plan-completions-voting", "attacks": list(attacks),
        "defenses": ["private-rag", "dp-vote"], "corpora": ["synthetic-email"], "modes": ["single"],
        "epsilons": [1.0], "budget": budget, "audit": "off",
        "attack_params": {a: p for a, p in {
            "ps": GENERAL_POOL, "pm": GENERAL_POOL, "mi": {"n_members": 2, "n_nonmembers": 2, "kb_size": 20},
            "deal": {"seed_pool": "shared-extraction", "seed_pool_version": "2"}}.items() if a in attacks},
        "corpus_params": {"synthetic-email": {"n_docs": 60}},
    })


def named(table: CompletionTable, run_dir: Path) -> CompletionTable:
    """``table`` with its source named by the run's grid (its folder is machine-specific)."""
    try:
        name = json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))["config"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        name = run_dir.name
    return replace(table, source=f"grid run {name!r}")


def _most_observed(rows: list[dict], key: tuple[str, ...], count: str) -> list[dict]:
    """Per ``key`` (row fields), the first row with the largest ``count``, sorted by key."""
    best: dict[tuple, dict] = {}
    for row in rows:
        k = tuple(row[f] for f in key)
        if k not in best or row[count] > best[k][count]:
            best[k] = row
    return [best[k] for k in sorted(best)]


def merge(tables: list[CompletionTable], shipped: dict | None = None) -> dict:
    """One table: per key, the table with the most observations wins (medians do not add up).
    ``shipped`` (the table as shipped, its rows already naming where they come from) competes
    after ``tables``, so a run wins a tie."""
    sections = {"rows": (("model", "attack", "role"), "n"), "calls": (("attack",), "cells"),
                "voting": (("defense", "attack", "model"), "answers"),
                "target_under_defense": (("defense", "attack", "model"), "n")}
    merged = {}
    for section, (key, count) in sections.items():
        rows = [{**row, "from": t.source} for t in tables for row in t.to_json()[section]]
        rows += (shipped or {}).get(section, [])
        merged[section] = _most_observed(rows, key, count)
    return merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=4)
    ap.add_argument("--run-dir", type=Path, default=Path("/tmp/ragleak-plan-completions"))
    ap.add_argument("--also", type=Path, action="append", default=[])
    ap.add_argument("--observe-only", action="store_true",
                    help="read --run-dir as it is (a run stopped early: its finished cells) instead of running it")
    ap.add_argument("--voting", action="store_true",
                    help="run the voting defenses' grid (PS under private-rag and dp-vote) instead of the attacks'")
    ap.add_argument("--attacks", default=",".join(VOTING_ATTACKS), help="the attacks of the --voting grid")
    ap.add_argument("--bare-only", action="store_true",
                    help="keep only the runs' bare-answer rows (a run under a context-budget defense such as ca-dp: "
                         "its attacks' other answers and agent calls are shaped by the defense)")
    ap.add_argument("--under-only", action="store_true",
                    help="keep only the runs' target_under_defense rows (a run under one noisy defense, e.g. "
                         "bench_plan.py --keep-run: its pooled rows and agent calls are shaped by that defense)")
    ap.add_argument("--keep-shipped", action="store_true",
                    help="merge with the shipped table (its runs may be gone): per key the most observations win")
    args = ap.parse_args()
    shipped = json.loads(OUT.read_text(encoding="utf-8")) if args.keep_shipped and OUT.exists() else None
    t0 = time.perf_counter()
    grid = voting_config(args.budget, args.attacks.split(",")) if args.voting else config(args.budget)
    state = None if args.observe_only else run_grid(grid, args.run_dir, workers=1)
    wall = time.perf_counter() - t0
    tables = [named(observe(d), d) for d in [args.run_dir, *args.also]]
    if args.voting:  # the attacks ran against defenses that shape their answers and agents: voting rows only
        tables = [CompletionTable({}, t.source, 0, {}, t.voting) for t in tables]
    bare_repeats = {}
    if args.bare_only:
        # the bare rows, and of the calls only each attack's share of repeated bare questions (the
        # rest of its calls is shaped by the defense): it joins the merged row of that attack
        bare_repeats = {a: (c.bare_repeat_share, t.source) for t in tables for a, c in t.calls.items()
                        if c.bare_repeat_share is not None}
        tables = [CompletionTable({k: r for k, r in t.rows.items() if r.role == "bare"}, t.source) for t in tables]
    if args.under_only:
        tables = [CompletionTable({}, t.source, 0, under=t.under) for t in tables]
    merged = merge(tables, shipped)
    for row in merged["calls"]:
        if row["attack"] in bare_repeats:
            row["bare_repeat_share"], row["bare_repeat_from"] = bare_repeats[row["attack"]]
    # the tables merged in, newest first, flat: each keeps its own one-clause source
    earlier = [] if shipped is None else [shipped["source"], *shipped.get("earlier_sources", [])]
    counts = defaultdict(int)
    for row in merged["rows"]:
        counts[row["role"]] += row["n"]
    data = {
        "source": (f"measured by benchmarks/plan_completions.py on {datetime.now(timezone.utc).date()} from "
                   + ", ".join(t.source for t in tables) + " (default model, greedy, 1 thread)"),
        "earlier_sources": earlier,
        "unattributed": sum(t.unattributed for t in tables) + (shipped.get("unattributed", 0) if shipped else 0),
        "run": {"observed": dict(counts), **({} if state is None else {
            "cells": state.total, "errors": state.errors, "model_calls": state.model_calls, "wall_s": round(wall, 1)})},
        **merged,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
