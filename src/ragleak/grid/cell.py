"""Run one grid cell end to end and store its record: corpus -> index -> defended pipeline ->
attack transcript -> metrics.

Every part comes from one ``Stack`` per cell, built from the cell's stack config with the run's
generation cache (``RUN_DIR/generations.sqlite``). Loaded parts (embedder, model weights, built
indexes) are memoised per process by the stack module, so a worker pays for a model load once,
not once per cell; every worker reads and fills the same cache file, which is how cells whose
generations coincide (an inert epsilon, a post-processing-only defense) cost no extra model
calls. The cell's stack counts its own model calls and cache hits per role (target, attacker,
standard).

A cell whose spec names an endpoint target (``CellSpec.target``) queries the user's service
instead of a pipeline: nothing is indexed here, the grid's corpus (the user's copy of what the
service indexed) is chunked for the metrics, the attack's corpus view comes from the grid's view
file, and the defense is the service's own (``external`` or ``none``). The stack still supplies
the attacker's model and the metrics' models.
"""

from __future__ import annotations

import json
import platform
import time
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ragleak.attacks.base import CorpusView, Transcript
from ragleak.attacks.views import read_view
from ragleak.corpora import documents_digest, load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.defenses import defense_class
from ragleak.defenses.base import Defense
from ragleak.errors import ConfigError, CorpusError
from ragleak.files import sha256_file
from ragleak.grid.spec import DEFAULT_MIN_ANSWERED_SHARE, CellSpec, GridConfig
from ragleak.grid.store import CellRecord, QueryCounts, RunStore
from ragleak.metrics.base import MetricContext
from ragleak.metrics.compute import compute_metrics
from ragleak.rag.pipeline import AuditPolicy
from ragleak.rag.target import PipelineTarget, Target, target_from_config
from ragleak.records import Passage, digest
from ragleak.stack import Stack


def _engine() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("ragleak", "llama-cpp-python", "faiss-cpu", "onnxruntime"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


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

    store = RunStore(Path(run_dir))
    t0 = time.perf_counter()
    stack = cell_stack(spec, run_dir)
    try:
        attack = ATTACKS.get(spec.attack)(**spec.attack_params)
        documents = load_corpus(spec.corpus, **spec.corpus_params)
        if spec.corpus_digest is not None and documents_digest(documents) != spec.corpus_digest:
            # the cell id pins the content it was planned on; never store results for other content
            raise CorpusError(f"corpus {spec.corpus!r} changed since the grid was planned; run the grid again")
        defense = _defense(spec)
        ctx = stack.context(spec.seed)
        pipeline = None
        if spec.is_endpoint:
            target, passages, view = _endpoint_parts(spec, documents)
        else:
            indexed, view = attack.prepare_corpus(documents, spec.seed)
            index = stack.index(indexed, store=Path(run_dir) / "indexes")  # built once per run, loaded by every worker
            pipeline = stack.pipeline(index, defense, ctx, audit=audit)
            target, passages = PipelineTarget(pipeline), index.passages
        t_setup = time.perf_counter() - t0
        transcript = attack.run(target, ctx, budget=spec.budget, corpus_view=view, mode=spec.mode)
        text = transcript.to_json()
        store.write_transcript(spec.cell_id, text)
        record = measured_record(spec, transcript, MetricContext(passages, stack, spec.seed), defense,
                                 min_answered_share(run_dir), transcript_digest=digest(text))
        record = record.model_copy(update={"audit": audit_record(audit, pipeline), "timings": {
            "setup_s": round(t_setup, 3), "total_s": round(time.perf_counter() - t0, 3),
            "generation_s": round(sum(q.trace.timings.get("generate", 0.0) for q in transcript.queries
                                      if q.trace is not None), 3),
            # the model's own time per role: an agent attack's calls ("attacker") are not in the
            # target's generate hook, and the dry run's ETA prices them
            **{f"{role}_model_s": round(seconds, 3) for role, seconds in stack.model_seconds().items()}}})
    except Exception as exc:  # a failing cell is a record, not a crashed grid
        record = CellRecord(
            cell_id=spec.cell_id, spec=spec, status="error", error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(), model_calls=stack.model_calls, cache_hits=stack.cache_hits,
            calls_by_role=stack.calls(), timings={"total_s": round(time.perf_counter() - t0, 3)}, engine=_engine(),
            cache_repairs=stack.cache_repairs, cache_waited=stack.cache_waited, cache_takeovers=stack.cache_takeovers,
        )
    store.write(record)
    return record


def _endpoint_parts(spec: CellSpec, documents) -> tuple[Target, list[Passage], CorpusView]:
    """An endpoint cell's target, the passages its metrics read (the grid's copy of the service's
    corpus, chunked as the stack would) and its attack's corpus view (the grid's view file, or none)."""
    view = CorpusView()
    if spec.view is not None:
        if spec.view_digest is not None and sha256_file(Path(spec.view)) != spec.view_digest:
            raise ConfigError(f"view file {spec.view} changed since the grid was planned; run the grid again")
        view = read_view(spec.view)
    passages = chunk_documents(documents, spec.stack.chunk_words, spec.stack.chunk_overlap)
    return target_from_config(spec.target), passages, view  # type: ignore[arg-type]


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


def audit_record(policy: AuditPolicy, pipeline) -> dict:
    """What the cell record says about the audit: the policy, and the generate hook's references
    (generated, found in the cache, skipped) with the share of its calls that were audited. An
    endpoint cell (no pipeline of ours) has no hooks to audit: empty."""
    if pipeline is None:
        return {}
    counts = pipeline.audit_counts.as_dict()
    calls = sum(counts.values())
    return {"mode": policy.mode, "fraction": policy.fraction, "references": counts,
            "audited_share": round((counts["generated"] + counts["cached"]) / calls, 4) if calls else None}


def transcript_status(transcript: Transcript, min_share: float) -> str:
    """The status a transcript's cell gets: ``failed`` when the session was stopped on sustained
    errors (it measured too little to read, whatever share answered), else by its query counts."""
    return "failed" if transcript.stopped else QueryCounts.of(transcript).status(min_share)


def measured_record(spec: CellSpec, transcript: Transcript, context: MetricContext, defense: Defense | None,
                    min_share: float, transcript_digest: str | None = None) -> CellRecord:
    """The record of a cell whose attack ran: metrics over the answered queries, counts by outcome,
    the status they give (``QueryCounts.status``), the release fingerprint, the defense's hook
    summary, guarantee and state, and the stack's counters. ``defense`` None: a transcript scored
    after the fact (``grid.scored``), whose target's defense and guarantee are not known here."""
    counts = QueryCounts.of(transcript)
    stack = context.stack
    status = transcript_status(transcript, min_share)
    return CellRecord(
        cell_id=spec.cell_id, spec=spec, status=status, error=transcript.stopped,
        metrics=compute_metrics(transcript, context), counts=counts,
        transcript_digest=transcript_digest, release_digest=transcript.release_digest(),
        hook_summary=_hook_summary(transcript),
        guarantee=defense.guarantee().model_dump(mode="json") if defense else {},
        defense_state=_defense_state(defense),
        model_calls=stack.model_calls if stack else 0, cache_hits=stack.cache_hits if stack else 0,
        calls_by_role=stack.calls() if stack else {}, cache_repairs=stack.cache_repairs if stack else 0,
        cache_waited=stack.cache_waited if stack else 0, cache_takeovers=stack.cache_takeovers if stack else 0,
        engine=_engine(),
    )


def _defense_state(defense: Defense | None) -> dict:
    """The defense's own state and, for a voting defense, what its answers decoded (``VotingUse``,
    which the dry run's expected ETA reads from finished runs)."""
    if defense is None:
        return {}
    state = dict(defense.state())
    if defense.voting_used.answers:
        state["voting_used"] = defense.voting_used.model_dump(mode="json")
    return state


def _hook_summary(transcript) -> dict[str, dict[str, int]]:
    summary: dict[str, dict[str, int]] = {}
    for q in transcript.queries:
        if q.trace is None:
            continue
        for h in q.trace.hooks:
            row = summary.setdefault(h.hook, {"changed": 0, "calls": 0, "reordered": 0, "releases": 0})
            row["releases"] += int(h.releases_context)
            if h.audited:
                row["calls"] += 1
                row["changed"] += int(h.changed)
                row["reordered"] += int(h.order_only)
            else:  # only where the audit policy skipped a reference generation
                row["unaudited"] = row.get("unaudited", 0) + 1
    return summary
