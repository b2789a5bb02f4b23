"""dp-retrieval's per-query selection time against FAISS flat search top-k on the same index.

Issue 39: the DP pool scored every passage by a FAISS search of k = N followed by reading one
passage per document from SQLite (1.8 s per query at 100,000 passages, where flat search took
5.9 ms). The pool is now scored in one vectorised pass over the index's stored vectors (the
kernel FAISS's flat search uses), aggregated per document with numpy, and only the k selected
passages are read. Timed per query, interleaved (flat search, then the DP selection, same query):

* ``flat_search``: ``PassageIndex.search(q, k)``: FAISS flat top-k plus reading the k passages;
* ``dp_selection``: ``DPRetrieval.score_retrieval(q, [])`` after ``begin_query(index)``: every
  passage scored exactly, the per-document max, clip, Laplace noise on every document, top-k,
  the k passages read;
* ``old_pool`` (``--old-queries``, a few queries only): the pre-issue path, a FAISS search of
  k = N and one passage per document read from SQLite (what ``best_per_document`` did).

Each is timed in wall and in this process's CPU seconds (the CPU figure is what survives a busy
machine: another job's preemption shows in wall time only); which side goes first alternates by
round. Query vectors are computed before timing (a pipeline embeds the query once for both). Indexes:

* synthetic (``--synthetic 100000,1000000``): random unit vectors of the embedder's dimension
  (384), documents of 1-4 passages (uniform), chunks of a document consecutive, queries random
  unit vectors; passage text is a short label (text is read only for the k selected);
* real (``--real N``): WordNet glosses (Debian wordnet-base) embedded by the real all-MiniLM-L6-v2,
  consecutive synsets grouped into documents of 1-4 passages, queries "what does LEMMA mean?"
  for lemmas not in the index; built once into ``--real-dir`` (kept for reruns). Embedding here
  runs at ~17-28 passages/s, so a real index of 1M passages takes ~10-16 h: the real size is
  what builds in about 10 minutes, and the 1M point is synthetic (selection needs only vectors
  and document ids).

Writes ``benchmarks/results/bench_dp_selection-<date>.json`` (and a summary on stdout):

    RAGLEAK_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_dp_selection.py \
        [--synthetic 100000,1000000] [--real 9000] [--real-dir DIR] [--queries 30] [--rounds 3] [--real-rounds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DIM = 384  # all-MiniLM-L6-v2's dimension
K = 5  # documents selected per query (dp-retrieval's default k, the pipeline's top_k)


class UnitVectorQueries:
    """The embedder of a synthetic index: a query's vector is a random unit vector seeded by its
    text (deterministic); passages are added from a precomputed matrix (``encode`` of ``add``)."""

    name = "synthetic-unit-vectors"
    dim = DIM

    def encode(self, texts):
        rows = []
        for t in texts:
            rng = np.random.default_rng(abs(hash(("query", t))) % (2**63))
            v = rng.standard_normal(DIM).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows) if rows else np.zeros((0, DIM), dtype=np.float32)


def chunk_counts(n_passages: int, rng: np.random.Generator) -> list[int]:
    """Passages per document, 1-4 uniform, summing to ``n_passages``."""
    counts, total = [], 0
    while total < n_passages:
        c = int(min(rng.integers(1, 5), n_passages - total))
        counts.append(c)
        total += c
    return counts


def synthetic_index(n_passages: int, seed: int = 0):
    from ragleak.rag.index import PassageIndex
    from ragleak.records import Passage

    rng = np.random.default_rng(seed)
    vectors = np.empty((n_passages, DIM), dtype=np.float32)
    for start in range(0, n_passages, 100_000):  # in blocks: no float64 copy of the whole matrix
        block = rng.standard_normal((min(100_000, n_passages - start), DIM), dtype=np.float32)
        vectors[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    passages, i = [], 0
    for d, c in enumerate(chunk_counts(n_passages, rng)):
        for j in range(c):
            passages.append(Passage(id=f"s{d}#{j}", doc_id=f"s{d}", text=f"{i} synthetic passage {j} of s{d}"))
            i += 1
    index = PassageIndex(UnitVectorQueries(), kind="flat")
    index.add(passages, encode=lambda texts: vectors[[int(t.split(" ", 1)[0]) for t in texts]])
    return index


def wordnet_passages(n_passages: int, seed: int = 0):
    """``n_passages`` glosses as passages of documents of 1-4 consecutive synsets, and query lemmas
    taken from synsets left out of the index."""
    from ragleak.corpora import make_corpus
    from ragleak.records import Passage

    docs = make_corpus("wordnet-glosses", n_docs=n_passages + 200, seed=seed).load()
    held_out, docs = docs[::(n_passages + 200) // 200][:200], docs
    held = {d.id for d in held_out}
    docs = [d for d in docs if d.id not in held][:n_passages]
    rng = np.random.default_rng(seed)
    passages, i = [], 0
    for number, c in enumerate(chunk_counts(len(docs), rng)):
        for j in range(c):
            passages.append(Passage(id=f"w{number}#{j}", doc_id=f"w{number}", text=docs[i].text))
            i += 1
    queries = [f"What does {d.text.split(':', 1)[0].split(',')[0].strip()} mean?" for d in held_out]
    return passages, queries


def build_real_index(n_passages: int, directory: Path) -> dict:
    """The real index of ``n_passages`` WordNet glosses, built (resumably) or loaded from ``directory``."""
    from ragleak.rag.embedder import make_embedder
    from ragleak.rag.index import PassageIndex

    directory = Path(directory)
    record = directory.with_name(directory.name + ".build.json")  # the build's own figures, kept for reruns
    if (directory / "manifest.json").exists():
        built = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
        return {"index": str(directory), **built, "reused": True}
    passages, _ = wordnet_passages(n_passages)
    t0 = time.perf_counter()
    index = PassageIndex.build(passages, make_embedder("all-MiniLM-L6-v2", n_threads=1),
                               work_dir=directory.with_name(directory.name + ".slices"), kind="flat")
    index.save(directory)
    built = {"built_s": round(time.perf_counter() - t0, 1), "built_on": str(date.today()),
             "load_avg_after_build": list(os.getloadavg()),
             "embedded_per_s": round(index.build_stats["embedded"] / max(index.build_stats["embed_s"], 1e-9), 1)}
    record.write_text(json.dumps(built), encoding="utf-8")
    return {"index": str(directory), **built, "reused": False}


def old_pool(index, query: str) -> int:
    """The pre-issue-39 pool: FAISS search of k = N, then one passage per document read from SQLite."""
    scores, ids = index._search_faiss(index._encode_queries([query]), len(index), exact=True)
    ids = ids[0][ids[0] >= 0]
    sorted_ids, doc_number, _ = index._documents()
    _, first = np.unique(doc_number[np.searchsorted(sorted_ids, ids)], return_index=True)
    return len(index._store.get_many(ids[np.sort(first)].tolist()))


def stats(seconds: list[float]) -> dict:
    ms = [1000 * s for s in seconds]
    return {"min_ms": round(min(ms), 3), "median_ms": round(statistics.median(ms), 3), "max_ms": round(max(ms), 3),
            "n": len(ms)}


def timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def ratios(a: list[float], b: list[float]) -> dict:
    pairs = [x / y for x, y in zip(a, b) if y > 0]
    return {"of_medians": round(statistics.median(a) / statistics.median(b), 2),
            "of_mins": round(min(a) / min(b), 2),
            "pairwise": {"min": round(min(pairs), 2), "median": round(statistics.median(pairs), 2),
                         "max": round(max(pairs), 2)}}


def measure(index, queries: list[str], rounds: int, old_queries: int) -> dict:
    from ragleak.context import RunContext
    from ragleak.defenses import make_defense

    index._encode_queries(queries)  # query vectors memoised: neither side pays the embedder
    defense = make_defense("dp-retrieval")
    defense.prepare(RunContext(seed=0))
    t0 = time.perf_counter()
    defense.begin_query(index, ())
    picked = defense.score_retrieval(queries[0], [])
    first = time.perf_counter() - t0  # the once-per-index document map and vector view included
    assert len(picked) == K and len({s.passage.doc_id for s in picked}) == K
    card = {a.name: a.met for a in defense.guarantee().assumptions}
    def select(q):
        defense.begin_query(index, ())
        defense.score_retrieval(q, [])

    times: dict[str, list[tuple[float, float]]] = {"flat": [], "dp": []}
    for r in range(rounds):
        for q in queries:
            sides = [("flat", lambda: index.search(q, K)), ("dp", lambda: select(q))]
            for name, fn in sides if r % 2 == 0 else sides[::-1]:
                times[name].append(timed(fn))
    wall = {name: [w for w, _ in t] for name, t in times.items()}
    cpu = {name: [c for _, c in t] for name, t in times.items()}
    out = {"passages": len(index), "documents": len(index.doc_ids), "first_query_s": round(first, 3),
           "card_assumptions_met": card,
           "wall": {"flat_search": stats(wall["flat"]), "dp_selection": stats(wall["dp"]),
                    "dp_over_flat": ratios(wall["dp"], wall["flat"])},
           "cpu": {"flat_search": stats(cpu["flat"]), "dp_selection": stats(cpu["dp"]),
                   "dp_over_flat": ratios(cpu["dp"], cpu["flat"])}}
    if old_queries:
        old = []
        for q in queries[:old_queries]:
            t0 = time.perf_counter()
            old_pool(index, q)
            old.append(time.perf_counter() - t0)
        out["old_pool_wall"] = stats(old)
        out["old_over_flat_wall_medians"] = round(statistics.median(old) / statistics.median(wall["flat"]), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", default="100000,1000000", help="passage counts of synthetic indexes ('' for none)")
    ap.add_argument("--real", type=int, default=0, help="passages of the real WordNet index (0: none)")
    ap.add_argument("--real-dir", type=Path, default=Path("/tmp/ragleak-bench-dp-selection"))
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--real-rounds", type=int, default=10, help="rounds on the real index (milliseconds per query)")
    ap.add_argument("--old-queries", type=int, default=3, help="queries timed on the old path (at <= 100k passages)")
    ap.add_argument("--out", type=Path,
                    default=ROOT / "benchmarks" / "results" / f"bench_dp_selection-{date.today()}.json")
    args = ap.parse_args()

    from ragleak.rag.embedder import make_embedder
    from ragleak.rag.index import PassageIndex

    result = {
        "command": "RAGLEAK_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_dp_selection.py "
                   + " ".join(sys.argv[1:]),
        "date": str(date.today()),
        "machine": {"python": platform.python_version(), "cpu": platform.machine(), "cores": os.cpu_count(),
                    "threads": os.environ.get("RAGLEAK_THREADS"), "load_avg_at_start": list(os.getloadavg())},
        "note": ("a shared, busy 2-core machine (other jobs running): absolute times are noisy, both sides are "
                 "timed interleaved on the same query so their ratio is the figure to read"),
        "k": K, "runs": [],
    }
    for n in [int(x) for x in args.synthetic.split(",") if x.strip()]:
        t0 = time.perf_counter()
        index = synthetic_index(n)
        built = time.perf_counter() - t0
        queries = [f"q{j}" for j in range(args.queries)]
        run = {"index": "synthetic", "build_s": round(built, 1),
               **measure(index, queries, args.rounds, args.old_queries if n <= 100_000 else 0)}
        result["runs"].append(run)
        print(json.dumps({"index": run["index"], "passages": run["passages"],
                          "cpu_dp_over_flat": run["cpu"]["dp_over_flat"]}), flush=True)
        del index
    if args.real:
        directory = args.real_dir / f"wordnet-{args.real}"
        built = build_real_index(args.real, directory)
        index = PassageIndex.load(directory, make_embedder("all-MiniLM-L6-v2", n_threads=1))
        _, queries = wordnet_passages(args.real)
        run = {"index": "real (WordNet glosses, all-MiniLM-L6-v2)", **built,
               **measure(index, queries[: args.queries], args.real_rounds, args.old_queries)}
        result["runs"].append(run)
        print(json.dumps({"index": run["index"], "passages": run["passages"],
                          "cpu_dp_over_flat": run["cpu"]["dp_over_flat"]}), flush=True)
    result["load_avg_at_end"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
