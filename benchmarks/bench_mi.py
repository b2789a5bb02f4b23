"""Cost and reading of each membership attack on a tiny real run, as one JSON file.

Builds the default stack (or ``--config``'s) with generation caching off, so every query and every
attacker-LLM call is a real generation (``--cache`` turns it on: a rerun that changes only a scorer,
``--param mi-entailment.nli=true`` say, then costs no new generation, and only the first run's times
mean anything); indexes the first ``--kb`` documents of ``--corpus`` and
tests ``--members`` of them against ``--nonmembers`` documents after them (``membership_split``,
the same candidates for every attack). Per attack: queries, attacker-LLM calls and wall seconds
per candidate (split into the target's generation time, from the transcript, and the rest:
question writing, NLI, WordNet) and process CPU seconds per candidate (less distorted than wall time
on a loaded machine), and the MI metric's reading (AUC x100 with interval, TPRs,
finding). With two or more attacks, the paired AUC difference of each against the first one on the
same candidates. Timings are noisy: the machine is shared (the JSON says so).

    nice -n 10 PYTHONPATH=src .venv/bin/python benchmarks/bench_mi.py --members 2 --nonmembers 2 \
        --out benchmarks/results/bench_mi-DATE.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from pathlib import Path

ATTACKS = ("mi", "mi-entailment", "mi-interrogation", "mi-dcmi")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="synthetic-corp")
    ap.add_argument("--attacks", default=",".join(ATTACKS))
    ap.add_argument("--members", type=int, default=2)
    ap.add_argument("--nonmembers", type=int, default=2)
    ap.add_argument("--kb", type=int, default=20, help="documents indexed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=128, help="target answer length")
    ap.add_argument("--corpus-docs", type=int, default=0,
                    help="documents loaded (0: kb + nonmembers; repeated texts are dropped before the split)")
    ap.add_argument("--shuffle", action="store_true",
                    help="split the corpus in a seeded order, not first KB then non-members (the MI attacks' shuffle)")
    ap.add_argument("--param", action="append", default=[], metavar="ATTACK.KEY=JSON",
                    help="an attack parameter, e.g. mi-entailment.nli=true (repeatable)")
    ap.add_argument("--cache", action="store_true",
                    help="use the generation cache (a rerun with a new scorer costs no new generation); "
                         "then time per candidate is only meaningful on the first run")
    ap.add_argument("--config", type=Path, help="a stack config YAML instead of the default stack")
    ap.add_argument("--transcripts", type=Path, help="folder to write each attack's transcript to")
    ap.add_argument("--from", dest="from_dir", type=Path,
                    help="summarise the transcripts saved there by an earlier (or killed) run instead of running")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from ragleak.attacks import Transcript, make_attack
    from ragleak.attacks.membership import membership_split
    from ragleak.config import StackConfig, load_stack_config
    from ragleak.corpora import make_corpus
    from ragleak.measure import run_attack
    from ragleak.metrics import MetricContext
    from ragleak.metrics.membership import MembershipAUC, paired_auc_difference
    from ragleak.pipeline.build import build_target
    from ragleak.stack import Stack

    cfg = load_stack_config(args.config) if args.config else StackConfig(decoding={"max_tokens": args.max_tokens})
    cfg = cfg.model_copy(update={"use_cache": args.cache})
    stack = Stack(cfg)
    docs = make_corpus(args.corpus, n_docs=args.corpus_docs or args.kb + args.nonmembers).load()
    params: dict[str, dict] = {}
    for item in args.param:
        key, _, value = item.partition("=")
        attack_name, _, field = key.rpartition(".")
        try:
            params.setdefault(attack_name, {})[field] = json.loads(value)
        except json.JSONDecodeError:
            ap.error(f"--param {item!r}: expected ATTACK.KEY=JSON, e.g. mi-entailment.n_questions=1")
        if not attack_name or not field:
            ap.error(f"--param {item!r}: expected ATTACK.KEY=JSON, e.g. mi-entailment.n_questions=1")
    kb, view = membership_split(docs, args.members, args.nonmembers, args.kb, args.seed, shuffle=args.shuffle)
    t0 = time.perf_counter()
    index = None if args.from_dir else stack.index(kb)
    report = {"benchmark": "mi", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "model": cfg.model, "max_tokens": cfg.decoding.max_tokens, "top_k": cfg.top_k,
              "corpus": args.corpus, "kb": args.kb, "members": args.members, "nonmembers": args.nonmembers,
              "seed": args.seed, "shuffle": args.shuffle, "params": params, "cache": args.cache,
              "threads": cfg.n_threads or int(os.environ.get("RAGLEAK_THREADS", "0") or 0) or None,
              "index_seconds": round(time.perf_counter() - t0, 2),
              "note": "timings on a shared 2-core machine under load (nice -n 10): noisy, an upper bound",
              "from_transcripts": str(args.from_dir) if args.from_dir else None,
              "attacks": {}}
    candidates = len(view.documents)
    by_attack = {}
    for name in args.attacks.split(","):
        if args.from_dir:
            path = args.from_dir / f"{name}.transcript.json"
            if not path.is_file():
                continue
            t, cpu = Transcript.from_json(path.read_text(encoding="utf-8")), None
            version = t.attack_version
        else:
            attack = make_attack(name, n_members=args.members, n_nonmembers=args.nonmembers, kb_size=args.kb,
                                 shuffle=args.shuffle, **params.get(name, {}))
            target = build_target(stack, index)
            c0 = time.process_time()
            t = run_attack(attack, target, stack.context(args.seed), corpus_view=view).transcript
            cpu, version = time.process_time() - c0, attack.version
            if args.transcripts:
                args.transcripts.mkdir(parents=True, exist_ok=True)
                (args.transcripts / f"{name}.transcript.json").write_text(t.to_json(), encoding="utf-8")
        generation = sum(q.seconds for q in t.queries)
        mi = MembershipAUC().compute(t, MetricContext(seed=args.seed))
        by_attack[name] = t
        report["attacks"][name] = {
            "version": version, "queries": len(t.queries), "failed": t.errors,
            "queries_per_candidate": len(t.queries) / candidates,
            "attacker_llm_calls_per_candidate": t.state.get("attacker_calls", 0) / candidates,
            "seconds_per_candidate": round(t.seconds / candidates, 2),
            "cpu_seconds_per_candidate": round(cpu / candidates, 2) if cpu is not None else None,
            "target_seconds_per_candidate": round(generation / candidates, 2),
            "target_seconds_per_query": round(generation / max(1, len(t.queries)), 2),
            "other_seconds_per_candidate": round((t.seconds - generation) / candidates, 2),
            "fallback_questions": t.state.get("fallback_questions"),
            "mi_auc": mi.model_dump(mode="json"),
            "scores": {m.doc_id: {"member": m.member, **m.scores} for m in t.membership},
        }
    names = list(by_attack)
    if len(names) >= 2:
        base = names[0]
        labels = {m.doc_id: m.member for m in by_attack[base].membership}
        for other in names[1:]:
            a = {m.doc_id: m.scores for m in by_attack[other].membership}
            b = {m.doc_id: m.scores for m in by_attack[base].membership}
            for sa in sorted({k for s in a.values() for k in s}):
                for sb in sorted({k for s in b.values() for k in s}):
                    ids = [d for d in labels if sa in a.get(d, {}) and sb in b.get(d, {})]
                    if len({labels[d] for d in ids}) < 2:
                        continue
                    diff = paired_auc_difference([labels[d] for d in ids], [a[d][sa] for d in ids],
                                                 [b[d][sb] for d in ids], seed=args.seed)
                    report.setdefault("paired_auc_difference", {})[f"{other}[{sa}] - {base}[{sb}]"] = diff.to_dict()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for name, r in report["attacks"].items():
        print(f"{name:18s} {r['queries_per_candidate']:.1f} q/cand  {r['seconds_per_candidate']:7.1f} s/cand  "
              f"{r['cpu_seconds_per_candidate']} cpu-s/cand  AUC {r['mi_auc']['value']}")


if __name__ == "__main__":
    main()
