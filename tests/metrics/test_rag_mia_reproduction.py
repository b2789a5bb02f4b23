"""External check of our MI scorers on RAG_MIA's released per-sample outputs (Naseh et al., CCS 2025,
arXiv 2502.00306; github.com/ali7naseh/RAG_MIA). The repository states no licence, so none of its
files is committed here: the test reads them from a git clone of it, named by ``RAGLEAK_RAG_MIA``
(its git directory or work tree), and is skipped where there is none.

The result files sit only in the repository's history (500 targets each, 250 members): our
Interrogation scorer (``mi_text.interrogation_score``, lam = 0: their released scorer is plain
accuracy) and our AUC (``metrics.membership.auc``) must give the AUCs the research notes computed
from them, 0.941 (NFCorpus) and 0.857 (TREC-COVID), and our AUC of their per-document S2MIA BLEU
field 0.749, each within 0.005."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ragleak.attacks.mi_text import interrogation_score
from ragleak.metrics.membership import auc

FILES = {  # (commit, path): the newest commit that holds each file
    "nfcorpus": ("0a4fbfb", "results/target_docs/nfcorpus-llama3-Top15-M250-N15.json"),
    "trec-covid": ("cc85bbe", "results/target_docs/mia-trec-covid-llama3-Top15-M250-N15.json"),
    "s2-nfcorpus": ("ba1cb48", "results/target_docs/s2-nfcorpus-llama3-Top15-M250-N15.json"),
}
DEFAULT_CLONES = (Path("/work/.mirror/ali7naseh+RAG_MIA/repo"),)


def _clone() -> Path | None:
    named = os.environ.get("RAGLEAK_RAG_MIA")
    for path in ([Path(named)] if named else list(DEFAULT_CLONES)):
        if path.exists():
            return path
    return None


def load(name: str) -> dict:
    clone = _clone()
    if clone is None:
        pytest.skip("no RAG_MIA clone: set RAGLEAK_RAG_MIA to a git clone of ali7naseh/RAG_MIA")
    commit, path = FILES[name]
    out = subprocess.run(["git", f"--git-dir={clone / '.git' if (clone / '.git').exists() else clone}", "show",
                          f"{commit}:{path}"], capture_output=True, check=False)
    if out.returncode != 0:
        pytest.skip(f"the RAG_MIA clone lacks {commit}:{path}: {out.stderr.decode()[:200]}")
    return json.loads(out.stdout)


def _split(rows: dict, score) -> tuple[list[float], list[float]]:
    members, nonmembers = [], []
    for doc in rows.values():
        (members if doc["mem"] == "yes" else nonmembers).append(score(doc))
    return members, nonmembers


@pytest.mark.parametrize("name,expected", [("nfcorpus", 0.941), ("trec-covid", 0.857)])
def test_interrogation_scorer_reproduces_the_released_auc(name, expected):
    rows = load(name)
    members, nonmembers = _split(rows, lambda d: interrogation_score(d["answers"], d["llm_responses"], lam=0.0))
    assert (len(members), len(nonmembers)) == (250, 250)
    assert auc(members, nonmembers) == pytest.approx(expected, abs=0.005)


def test_our_auc_of_the_released_s2mia_bleu_scores():
    members, nonmembers = _split(load("s2-nfcorpus"), lambda d: d["bleu_score"])
    assert auc(members, nonmembers) == pytest.approx(0.749, abs=0.005)
