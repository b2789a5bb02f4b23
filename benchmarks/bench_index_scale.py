"""Index build at scale: a real ``ragleak index build`` killed with SIGKILL part-way and resumed,
checked to hold every passage exactly once, beside an uninterrupted build of the same corpus; then
search latency and recall of flat vs IVF (vs HNSW) over the same vectors, interleaved.

The corpus is generated at run time: ``--passages`` documents of ``--words`` random words (seeded,
from a fixed vocabulary), each shorter than a chunk, so one document is one passage. Embedding is
the real all-MiniLM-L6-v2 on one thread; FAISS is real. Writes JSON to
``benchmarks/results/bench_index_scale-<date>.json`` (and stdout).

    PYTHONPATH=src RAGLEAK_THREADS=1 nice -n 15 .venv/bin/python benchmarks/bench_index_scale.py \
        [--passages 100000] [--kill-at 0.5] [--no-baseline]

The issue's target is 100,000 passages (about an hour of embedding on a shared 2-core machine);
the JSON states the N it ran at.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VOCABULARY = (
    "ferry harbour orchard violin glacier bakery chess railway beekeeping pottery lighthouse regatta opera courier "
    "coral printing volcano archive river market clinic asthma telescope servo invoice payroll contract shipment "
    "warehouse audit patient dosage ward nurse surgeon ledger tenant landlord lease mortgage broker pension "
    "account password server backup firewall router kernel module compiler license patent trademark merger "
    "budget forecast quarter revenue salary bonus vendor supplier freight customs tariff harvest irrigation "
    "tractor barn cattle dairy cheese bread flour oven recipe kitchen menu waiter hotel booking flight airport "
    "passport visa embassy council mayor election ballot school teacher student exam lecture library museum "
    "gallery painting sculpture concert choir guitar piano drum festival parade stadium league coach referee"
).split()


def make_corpus(path: Path, passages: int, words: int, seed: int) -> list[str]:
    """``passages`` JSONL documents of ``words`` seeded random words; returns their ids."""
    rng = np.random.default_rng(seed)
    ids = []
    with open(path, "w", encoding="utf-8") as f:
        for i in range(passages):
            text = " ".join(rng.choice(VOCABULARY, size=words)) + f" (record {i})"
            ids.append(f"doc{i:07d}")
            f.write(json.dumps({"id": ids[-1], "text": text}) + "\n")
    return ids


def build_command(corpus: Path, out: Path, kind: str) -> list[str]:
    return [sys.executable, "-m", "ragleak.cli", "index", "build", str(corpus), "--out", str(out), "--kind", kind,
            "--json"]


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("RAGLEAK_THREADS", "1")
    return env


def run_build(corpus: Path, out: Path, kind: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    done = subprocess.run(build_command(corpus, out, kind), env=child_env(), capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"index build failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


def killed_build(corpus: Path, out: Path, kind: str, kill_slices: int) -> dict:
    """Start a build, SIGKILL it once ``kill_slices`` embedded slices exist beside ``out``."""
    slices = out.with_name(f".{out.name}.slices")
    t0 = time.perf_counter()
    child = subprocess.Popen(build_command(corpus, out, kind), env=child_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    while child.poll() is None and len(list(slices.glob("*.npy"))) < kill_slices:
        time.sleep(0.2)
    if child.poll() is not None:
        raise SystemExit(f"the build finished (rc {child.returncode}) before {kill_slices} slices: lower --kill-at")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    return {"killed_after_s": round(time.perf_counter() - t0, 2), "slices_kept": len(list(slices.glob("*.npy"))),
            "returncode": child.returncode, "index_written": out.exists()}


def check_every_passage_once(index, expected_ids: list[str]) -> dict:
    vector_ids, _ = index.vectors()
    stored = [p.id for p in index.passages]
    return {
        "faiss_vectors": int(index._faiss.ntotal),
        "distinct_vector_ids": int(len(set(vector_ids.tolist()))),
        "vector_ids_are_0_to_n": sorted(vector_ids.tolist()) == list(range(len(expected_ids))),
        "stored_passages": len(stored),
        "distinct_passage_ids": len(set(stored)),
        "passages_match_corpus": sorted(p.split("#")[0] for p in stored) == sorted(expected_ids),
    }


def latency(indexes: dict, queries: list[str], k: int, rounds: int) -> dict:
    """Per kind: median ms of ``search(q, k)`` (query vectors embedded beforehand: the same cost for
    every kind) and of the DP pool's exact ``best_per_document``; kinds interleaved per query."""
    for index in indexes.values():
        index._encode_queries(queries)  # warm the query-vector memo: only FAISS + store lookups are timed
    search: dict[str, list[float]] = {name: [] for name in indexes}
    pool: dict[str, list[float]] = {name: [] for name in indexes}
    for _ in range(rounds):
        for q in queries:
            for name, index in indexes.items():
                t0 = time.perf_counter()
                index.search(q, k)
                search[name].append(time.perf_counter() - t0)
    for q in queries[:10]:
        for name, index in indexes.items():
            t0 = time.perf_counter()
            index.best_per_document(q)
            pool[name].append(time.perf_counter() - t0)
    return {"search_ms": {n: round(1000 * statistics.median(v), 3) for n, v in search.items()},
            "exact_pool_ms": {n: round(1000 * statistics.median(v), 3) for n, v in pool.items()}}


def recall(indexes: dict, queries: list[str], k: int) -> dict:
    truth = {q: {h.passage.id for h in indexes["flat"].search(q, k)} for q in queries}
    return {name: round(float(np.mean([len(truth[q] & {h.passage.id for h in index.search(q, k)}) / k
                                       for q in queries])), 4)
            for name, index in indexes.items()}


def nprobe_sweep(indexes: dict, queries: list[str], k: int) -> list[dict]:
    """IVF recall@k against flat and search ms at several nprobe (the built default included)."""
    ivf = indexes["ivf"]
    default = ivf._faiss.nprobe
    truth = {q: {h.passage.id for h in indexes["flat"].search(q, k)} for q in queries}
    rows = []
    for nprobe in sorted({1, 4, 8, 16, 32, 64, default, ivf._faiss.nlist}):
        if nprobe > ivf._faiss.nlist:
            continue
        ivf._faiss.nprobe = nprobe
        times, hits = [], []
        for q in queries:
            t0 = time.perf_counter()
            found = ivf.search(q, k)
            times.append(time.perf_counter() - t0)
            hits.append(len(truth[q] & {h.passage.id for h in found}) / k)
        rows.append({"nprobe": nprobe, "default": nprobe == default, "recall": round(float(np.mean(hits)), 4),
                     "search_ms": round(1000 * statistics.median(times), 3)})
    ivf._faiss.nprobe = default
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=5000, help="N (the issue's target: 100000)")
    ap.add_argument("--words", type=int, default=100, help="words per passage (the default chunk is 120)")
    ap.add_argument("--kind", default="ivf", choices=["flat", "ivf", "hnsw"], help="kind of the killed build")
    ap.add_argument("--kill-at", type=float, default=0.5, help="SIGKILL once this share of slices is embedded")
    ap.add_argument("--no-baseline", action="store_true", help="skip the uninterrupted build (halves the time)")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / f"bench_index_scale-{date.today()}.json")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "src"))
    from ragleak.rag.embedder import make_embedder
    from ragleak.rag.index import EMBED_SLICE, PassageIndex

    report: dict = {"machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                                "cores": os.cpu_count(), "load_avg_at_start": os.getloadavg()},
                    "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                    "N": args.passages, "embed_slice": EMBED_SLICE}
    with tempfile.TemporaryDirectory(prefix="bench-index-scale-") as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus.jsonl"
        expected = make_corpus(corpus, args.passages, args.words, args.seed)
        slices_total = -(-args.passages // EMBED_SLICE)
        kill_slices = max(1, min(slices_total - 1, round(args.kill_at * slices_total)))

        if not args.no_baseline:
            seconds, info = run_build(corpus, tmp / "baseline", args.kind)
            report["uninterrupted"] = {"seconds": round(seconds, 2), **info}

        killed = killed_build(corpus, tmp / "resumed", args.kind, kill_slices)
        seconds, info = run_build(corpus, tmp / "resumed", args.kind)
        report["killed"] = killed
        report["resumed"] = {"seconds": round(seconds, 2), **info,
                             "slices_folder_removed": not (tmp / ".resumed.slices").exists()}
        interrupted_total = killed["killed_after_s"] + seconds
        report["killed_plus_resumed_s"] = round(interrupted_total, 2)
        if "uninterrupted" in report:
            base = report["uninterrupted"]["seconds"]
            report["resume_overhead"] = round(interrupted_total / base - 1, 4)  # incl. the slice lost to the kill
        report["passages_per_s"] = {
            "uninterrupted_wall": report.get("uninterrupted", {}).get("passages_per_s"),
            "uninterrupted_embedding": report.get("uninterrupted", {}).get("embedded_per_s"),
            "resumed_embedding": info.get("embedded_per_s"),
        }

        embedder = make_embedder(n_threads=int(os.environ.get("RAGLEAK_THREADS", "1")))
        built = PassageIndex.load(tmp / "resumed", embedder)
        report["integrity"] = check_every_passage_once(built, expected)
        report["integrity"]["ok"] = (report["integrity"]["faiss_vectors"] == args.passages
                                     and report["integrity"]["distinct_vector_ids"] == args.passages
                                     and report["integrity"]["vector_ids_are_0_to_n"]
                                     and report["integrity"]["distinct_passage_ids"] == args.passages
                                     and report["integrity"]["passages_match_corpus"])
        if "uninterrupted" in report:  # the resumed index answers as the uninterrupted one does
            base_index = PassageIndex.load(tmp / "baseline", embedder)
            q = "harbour ferry invoice"
            report["integrity"]["same_as_uninterrupted"] = (
                [(h.passage.id, round(h.score, 5)) for h in base_index.score_all(q)[:50]]
                == [(h.passage.id, round(h.score, 5)) for h in built.score_all(q)[:50]])

        indexes = {}
        conversions = {}
        for kind in ("flat", "ivf", "hnsw"):
            t0 = time.perf_counter()
            indexes[kind] = built if built.kind == kind else built.with_kind(kind)
            conversions[kind] = round(time.perf_counter() - t0, 2)
        rng = np.random.default_rng(args.seed + 1)
        queries = [" ".join(rng.choice(VOCABULARY, size=6)) for _ in range(args.queries)]
        report["index_from_vectors_s"] = conversions  # FAISS add (+ IVF training / HNSW graph) from stored vectors
        report["params"] = {kind: index.params for kind, index in indexes.items()}
        report.update(latency(indexes, queries, k=5, rounds=args.rounds))
        report["flat_over_ivf_search"] = round(report["search_ms"]["flat"] / report["search_ms"]["ivf"], 2)
        report["recall_at_5_vs_flat"] = recall(indexes, queries, 5)
        report["recall_at_10_vs_flat"] = recall(indexes, queries, 10)
        report["ivf_nprobe_sweep"] = nprobe_sweep(indexes, queries, k=5)
    report["load_avg_at_end"] = os.getloadavg()
    text = json.dumps(report, indent=2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
