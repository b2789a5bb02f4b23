"""Our MI scorers and statistics on RAG_MIA's released per-sample outputs, as one JSON file.

RAG_MIA (Naseh et al., CCS 2025, arXiv 2502.00306; github.com/ali7naseh/RAG_MIA) states no licence,
so nothing of it is committed: this reads the result files from a git clone of it (``--clone``,
its git directory or work tree; they sit only in the repository's history). For each file: AUC x100
with its bootstrap interval, TPR at 10%, 1% and 0.1% FPR with Clopper-Pearson and
threshold-reselecting bootstrap intervals (``metrics.membership.membership_auc``) of

* our Interrogation scorer (``mi_text.interrogation_score``) at lam = 0 (their released scorer:
  plain accuracy) and lam = 5 (the paper's UNK penalty), on NFCorpus and TREC-COVID (Llama-3-8B,
  Top-15, 250 + 250 targets, 15 questions each);
* their per-document S2MIA BLEU field, and our own BLEU (``membership.bleu``: our tokens, add-one
  smoothing) of their responses against the whole document (as theirs is computed), NFCorpus.

tests/metrics/test_rag_mia_reproduction.py asserts the three AUCs the notes computed (0.941, 0.857,
0.749) within 0.005.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_rag_mia.py --clone PATH \
        --out benchmarks/results/bench_rag_mia-DATE.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
from pathlib import Path

FILES = {
    "nfcorpus": ("0a4fbfb", "results/target_docs/nfcorpus-llama3-Top15-M250-N15.json"),
    "trec-covid": ("cc85bbe", "results/target_docs/mia-trec-covid-llama3-Top15-M250-N15.json"),
    "s2-nfcorpus": ("ba1cb48", "results/target_docs/s2-nfcorpus-llama3-Top15-M250-N15.json"),
}


def load(clone: Path, name: str) -> dict:
    commit, path = FILES[name]
    git_dir = clone / ".git" if (clone / ".git").exists() else clone
    out = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], capture_output=True, check=True)
    return json.loads(out.stdout)


def reading(rows: dict, score) -> dict:
    from ragleak.metrics.membership import membership_auc

    members = [score(d) for d in rows.values() if d["mem"] == "yes"]
    nonmembers = [score(d) for d in rows.values() if d["mem"] != "yes"]
    res = membership_auc(members, nonmembers, seed=0).to_dict()
    return {k: res[k] for k in ("auc100", "n_members", "n_nonmembers", "tpr_at_10pct", "tpr_at_1pct",
                                "tpr_at_1pct_ci", "tpr_at_0_1pct", "tpr_at_0_1pct_ci", "tpr_intervals",
                                "low_fpr_supported", "finding")} | {"auc_interval": [res["interval"]["low"],
                                                                                      res["interval"]["high"]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clone", type=Path, required=True, help="a git clone of ali7naseh/RAG_MIA")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from ragleak.attacks.membership import bleu
    from ragleak.attacks.mi_text import interrogation_score

    def first(response):
        return response[0] if isinstance(response, list) else response

    report = {"benchmark": "rag_mia", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "source": {k: f"ali7naseh/RAG_MIA@{c}:{p}" for k, (c, p) in FILES.items()},
              "licence": "none stated in the repository: files read from a clone, not committed", "readings": {}}
    for name in ("nfcorpus", "trec-covid"):
        rows = load(args.clone, name)
        for lam in (0.0, 5.0):
            report["readings"][f"{name} interrogation lam={lam:g}"] = reading(
                rows, lambda d, lam=lam: interrogation_score(d["answers"], d["llm_responses"], lam))
    rows = load(args.clone, "s2-nfcorpus")
    report["readings"]["s2-nfcorpus released bleu_score"] = reading(rows, lambda d: d["bleu_score"])
    report["readings"]["s2-nfcorpus our bleu vs whole doc"] = reading(
        rows, lambda d: bleu(first(d["llm_responses"]), d["text"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for key, r in report["readings"].items():
        print(f"{key:40s} AUC {r['auc100']:.1f} [{r['auc_interval'][0]:.1f}, {r['auc_interval'][1]:.1f}]  "
              f"TPR@1% {r['tpr_at_1pct']:.2f} {r['tpr_intervals']['1%']}")


if __name__ == "__main__":
    main()
