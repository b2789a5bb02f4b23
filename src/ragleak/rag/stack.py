"""Assemble the default stack from a StackConfig: embedder, index, cached generator, pipeline."""

from __future__ import annotations

from pathlib import Path

from ragleak.config import StackConfig
from ragleak.context import RunContext
from ragleak.defenses import Defense
from ragleak.rag.cache import CachedGenerator, GenerationCache
from ragleak.rag.embedder import Embedder, make_embedder
from ragleak.files import ragleak_home
from ragleak.rag.generator import Generator, LlamaCppGenerator
from ragleak.rag.index import PassageIndex
from ragleak.rag.pipeline import RAGPipeline


def default_cache_path() -> Path:
    return ragleak_home() / "generations.sqlite"


def make_generator(config: StackConfig) -> Generator:
    generator = LlamaCppGenerator(
        config.model, n_threads=config.n_threads, n_ctx=config.n_ctx, params=config.decoding
    )
    if not config.use_cache:
        return generator
    return CachedGenerator(generator, GenerationCache(config.cache_path or default_cache_path()))


def load_index(directory: Path, config: StackConfig, embedder: Embedder | None = None) -> PassageIndex:
    return PassageIndex.load(directory, embedder or make_embedder(config.embedder))


def make_pipeline(
    index: PassageIndex,
    config: StackConfig,
    defense: Defense | None = None,
    generator: Generator | None = None,
) -> RAGPipeline:
    return RAGPipeline(
        index=index,
        generator=generator or make_generator(config),
        defense=defense,
        top_k=config.top_k,
        candidate_k=config.candidate_k,
        system_prompt=config.system_prompt,
        ctx=RunContext(seed=config.seed),
    )
