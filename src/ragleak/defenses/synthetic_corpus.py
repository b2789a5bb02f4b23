"""The DP keyword-histogram synthetic corpus behind ``dp-synthetic`` (pure numpy + an embedder).

Mechanism ("DP keyword-histogram corpus", a simplified stage 1a of DP-SynRAG:
Mori, Kakizaki, Miyagawa, Sakuma 2025, arXiv 2510.06719):

1. Public vocabulary V: the single-word lemmas of WordNet 3.0 (Debian's ``wordnet-base``), fixed
   before any private data is seen; English stop words are removed.
2. Each document d contributes x_d in {0,1}^|V|: its first K distinct vocabulary words in text
   order (a rule that reads only d), so ||x_d||_1 <= K.
3. Release h' = sum_d x_d + Laplace(K / eps) on *every* coordinate of V, zeros included.
4. Post-processing of h' only: the R = n_passages * words_per_passage words with the largest
   noisy counts are grouped by a public embedding model into n_passages synthetic passages.

Proof sketch. Adding or removing one document changes the count vector by x_d, whose L1 norm
is at most K, so step 3 is the Laplace mechanism with sensitivity K: eps-DP w.r.t. add/remove of
one document. Step 4, the embeddings of the synthetic passages, retrieval over them and every
LLM answer built from them read only h' (and public models), so by post-processing the whole
served stream, for any number of queries, stays eps-DP: a one-time release, flat in T.
A person owning m documents changes the counts by <= m * K: (m * eps)-DP by group privacy.

Utility, honestly: a word survives only if many documents share it (its count must beat noise
of scale K / eps and the maximum of |V| noise draws); names, numbers and other rare specifics
essentially never do, and on small corpora the synthetic passages are mostly noise words.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from ragleak.errors import CorpusError
from ragleak.records import Passage

WORDNET_ROOT = Path("/usr/share/wordnet")
_WORD = re.compile(r"[a-z]+")
STOP_WORDS = frozenset("""a about above after again against all am an and any are as at be because been before being
below between both but by can did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when where
which while who whom why will with you your yours yourself yourselves""".split())


@lru_cache(maxsize=4)
def load_vocabulary(root: Path = WORDNET_ROOT) -> tuple[str, ...]:
    """Sorted single-word WordNet lemmas (alphabetic, >= 2 letters, no stop words)."""
    words: set[str] = set()
    for pos in ("noun", "verb", "adj", "adv"):
        path = Path(root) / f"index.{pos}"
        if not path.exists():
            raise CorpusError(f"the public vocabulary needs {path}: install Debian's wordnet-base "
                              "(apt-get install wordnet-base) or pass vocabulary_root")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(" "):
                continue
            lemma = line.split(" ", 1)[0]
            if lemma.isalpha() and len(lemma) >= 2 and lemma not in STOP_WORDS:
                words.add(lemma.lower())
    return tuple(sorted(words))


def document_keywords(text: str, vocabulary: frozenset[str] | set[str], k: int) -> list[str]:
    """The first k distinct vocabulary words of ``text``, in order (reads only this document);
    a plural whose singular is a lemma counts as that lemma."""
    out: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in vocabulary and word.endswith("s") and word[:-1] in vocabulary:
            word = word[:-1]  # a plural maps to its lemma ("bells" -> "bell")
        if word in vocabulary and word not in STOP_WORDS:
            out.setdefault(word, None)
            if len(out) == k:
                break
    return list(out)


def noisy_keyword_histogram(keyword_lists: Sequence[Sequence[str]], vocabulary: Sequence[str], k: int,
                            eps: float, rng: np.random.Generator) -> np.ndarray:
    """Counts of each vocabulary word over documents plus Laplace(k / eps) everywhere: eps-DP."""
    if eps <= 0 or k < 1:
        raise ValueError("need eps > 0 and k >= 1")
    position = {w: i for i, w in enumerate(vocabulary)}
    counts = np.zeros(len(vocabulary))
    for words in keyword_lists:
        if len(set(words)) > k:
            raise ValueError("a document contributes at most k distinct words")
        for w in set(words):
            counts[position[w]] += 1
    return counts + rng.laplace(0.0, k / eps, size=counts.shape)


def synthesize_passages(noisy: np.ndarray, vocabulary: Sequence[str], embedder, n_passages: int,
                        words_per_passage: int) -> list[Passage]:
    """Post-processing of the noisy histogram: top words grouped by a public embedder."""
    top = np.argsort(-noisy, kind="stable")[: n_passages * words_per_passage]
    words = [vocabulary[i] for i in top]
    vectors = embedder.encode(words)
    groups: list[list[int]] = [[i] for i in range(min(n_passages, len(words)))]
    for i in range(len(groups), len(words)):
        open_groups = [g for g in groups if len(g) < words_per_passage]
        best = max(open_groups, key=lambda g: float(vectors[g[0]] @ vectors[i]))
        best.append(i)
    return [Passage(id=f"synthetic-{j}#0", doc_id=f"synthetic-{j}",
                    text="Synthetic passage (DP keyword summary of the corpus): " + ", ".join(words[i] for i in g) + ".",
                    metadata={"synthetic": True})
            for j, g in enumerate(groups)]
