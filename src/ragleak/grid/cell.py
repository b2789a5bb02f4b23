"""Run one grid cell end to end and store its record: corpus -> passages -> index -> target
(``pipeline.build_target``) -> attack transcript and metrics (``measure.run_attack``) -> record.

Every part comes from one ``Stack`` per cell, built from the cell's stack config with the run's
generation cache (``RUN_DIR/generations.sqlite``). Loaded parts (embedder, model weights, built
indexes) are memoised per process by the stack module, so a worker pays for a model load once,
not once per cell; every worker reads and fills the same cache file, which is how cells whose
generations coincide (an inert epsilon, a post-processing-only defense) cost no extra model
calls. The cell's stack counts its own model calls and cache hits per role (target, attacker,
standard): the record carries them whole (``Stack.usage``).

A cell whose spec names an endpoint target (``CellSpec.target``) queries the user's service
instead of a pipeline: nothing is indexed here, the grid's corpus (the user's copy of what the
service indexed) is chunked for the metrics, the attack's corpus view comes from the grid's view
file, and the defense is the service's own (``external`` or ``none``). The stack still supplies
the attacker's model and the metrics' models.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ragleak.attacks.base import CorpusView
from ragleak.attacks.views import read_view
from ragleak.corpora import documents_digest, load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.defenses import defense_class
from ragleak.errors import CorpusError
from ragleak.grid.spec import DEFAULT_MIN_ANSWERED_SHARE, CellSpec, GridConfig
from ragleak.grid.store import CellRecord, RunStore, error_record, measured_record
from ragleak.measure import run_attack
from ragleak.pipeline.build import Source, build_target
from ragleak.pipeline.rag import AuditPolicy
from ragleak.pipeline.target import PipelineTarget
from ragleak.rag.index import PassageIndex
from ragleak.records import Document
from ragleak.stack import Stack


def _defense(spec: CellSpec):
    return defense_class(spec.defense)(**spec.defense_kwargs())


def cell_stack(spec: CellSpec, run_dir: str | Path) -> Stack:
    """The cell's stack: its config (one model thread unless it says otherwise) and the run's cache."""
    config = spec.stack if spec.stack.n_threads else spec.stack.model_copy(update={"n_threads": 1})
    return Stack(config, cache_path=Path(run_dir) / "generations.sqlite")


def execute_cell(spec: CellSpec, run_dir: str, audit: AuditPolicy | None = None) -> CellRecord:
    """Run ``spec`` and write its record (ok, partial, failed or error) into ``run_dir``; never
    raises for a cell failure. ``audit``: the reference-generation policy (the run plan's when None)."""
    from ragleak.attacks import ATTACKS

    audit = audit or audit_policy(run_dir)
    t0 = time.perf_counter()
    stack = cell_stack(spec, run_dir)
    kept: list = []  # the transcript, as soon as the attack ends: a metric that fails must not lose it
    try:
        attack, defense = ATTACKS.get(spec.attack)(**spec.attack_params), _defense(spec)
        kept_documents, view = _corpus(spec, attack)
        passages = chunk_documents(kept_documents, spec.stack.chunk_words, spec.stack.chunk_overlap)
        ctx = stack.context(spec.seed)  # the defense's and the attack's seeded streams
        source: Source = spec.target if spec.is_endpoint else stack.index_passages(  # type: ignore[assignment]
            passages, store=Path(run_dir) / "indexes")
        if isinstance(source, PassageIndex):
            passages = source.passages  # what the index holds (one built by another worker: its own copy)
        target = build_target(stack, source, defense, ctx=ctx, audit=audit)
        t_setup = time.perf_counter() - t0
        transcript, metrics = run_attack(attack, target, ctx, passages, budget=spec.budget, corpus_view=view,
                                         mode=spec.mode, keep=kept.append)
        record = measured_record(spec, transcript, metrics, defense, min_answered_share(run_dir),
                                 audit=target.pipeline.audit_summary() if isinstance(target, PipelineTarget) else {},
                                 timings={"setup_s": round(t_setup, 3), "total_s": round(time.perf_counter() - t0, 3),
                                          "generation_s": round(sum(q.trace.timings.get("generate", 0.0)
                                                                    for q in transcript.queries if q.trace), 3)})
    except Exception as exc:  # a failing cell is a record, not a crashed grid
        record = error_record(spec, exc, round(time.perf_counter() - t0, 3))
    # what the cell's models did, whether it measured or crashed
    return RunStore(Path(run_dir)).write_cell(record.model_copy(update={"usage": stack.usage()}),
                                              kept[0] if kept else None)


def _corpus(spec: CellSpec, attack) -> tuple[list[Document], CorpusView]:
    """The documents the cell's target holds and the attack's corpus view. The built-in stack: what
    ``Attack.prepare_corpus`` keeps of the corpus (its index is built once per run, loaded by every
    worker) and the view it gives. An endpoint: the grid's copy of the service's corpus (chunked as
    the stack would, for the metrics) and the grid's view file (or none)."""
    documents = load_corpus(spec.corpus, **spec.corpus_params)
    if spec.corpus_digest is not None and documents_digest(documents) != spec.corpus_digest:
        # the cell id pins the content it was planned on; never store results for other content
        raise CorpusError(f"corpus {spec.corpus!r} changed since the grid was planned; run the grid again")
    if spec.is_endpoint:
        return documents, CorpusView() if spec.view is None else read_view(Path(spec.view), spec.view_digest)
    return attack.prepare_corpus(documents, spec.seed)


def _planned(run_dir: str | Path, read, default):
    """``read(config)`` of the run plan's grid config, or ``default`` without a plan."""
    plan = Path(run_dir) / "plan.json"
    if plan.exists():
        try:
            return read(json.loads(plan.read_text(encoding="utf-8"))["config"])
        except (ValueError, KeyError, TypeError):
            pass  # a plan written before the field existed, or unreadable: the store reports the latter
    return default


def min_answered_share(run_dir: str | Path) -> float:
    """The run's ``GridConfig.min_answered_share`` from its plan (the default without one), so a
    resumed run judges its cells by the threshold it started with."""
    return _planned(run_dir, lambda c: float(c["min_answered_share"]), DEFAULT_MIN_ANSWERED_SHARE)


def audit_policy(run_dir: str | Path) -> AuditPolicy:
    """The run plan's audit policy (the grid default without one)."""
    fields = GridConfig.model_fields
    fallback = AuditPolicy(fields["audit"].default, fields["audit_fraction"].default)
    return _planned(run_dir, lambda c: AuditPolicy(c["audit"], float(c["audit_fraction"])), fallback)
