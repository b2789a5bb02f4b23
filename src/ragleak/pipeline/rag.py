"""RAGPipeline: retrieve, select top-k, prompt + generate, post-process, through four hooks.

Every call returns the answer and a ``Trace``: candidate and selected passages with scores, the
exact prompt, and for each hook a digest of what the identity hook would have passed on next to
a digest of what the defense passed on (exact and content-only; inputs are snapshotted before
each hook runs). The generate hook's identity is the plain generator on the same prompt with the
settings the generator had before the defense ran; when a defense replaces ``generate`` the
pipeline computes that reference first (through the cache, so a baseline run that already made
it costs nothing) - otherwise the audit could not tell a generation defense that acts from one
that only claims to. Text hooks whose output carries a retrieved passage verbatim are flagged.
Each hook record also carries the call's effect on the channel the hook feeds, against the identity
on the same input (``HookRecord.channel``, ``pipeline.channel_keys``): the top-k the identity's
scores select, the prompt rendered from the hook's input passages, the reference or the draft.

That reference is a full plain generation per query, most of the cost of a private-rag or
dp-vote query, so ``AuditPolicy`` says when to pay for it: ``all`` (every query), ``sample``
(a reference already in the cache, plus a fixed share of prompts chosen by their hash, plus the
pipeline's first) or ``off`` (only references already in the cache). An unaudited call's hook
record has ``digest_in`` None. The answer never depends on the policy, only the trace does.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

from ragleak.context import RunContext
from ragleak.defenses.base import Defense
from ragleak.errors import CacheCorruptError
from ragleak.pipeline.channel_keys import prompt_change, retrieval_change, select_top_k, text_change, text_key
from ragleak.rag.generator import Generation, Generator
from ragleak.rag.index import PassageIndex
from ragleak.rag.prompt import DEFAULT_SYSTEM_PROMPT, build_rag_messages
from ragleak.records import HookRecord, Passage, RetrievedItem, Scored, Trace, Turn, digest


AuditMode = Literal["all", "sample", "off"]
AUDIT_MODES: tuple[AuditMode, ...] = ("all", "sample", "off")
DEFAULT_AUDIT_FRACTION = 0.1


@dataclass(frozen=True)
class AuditPolicy:
    """Which queries of a defense that replaces ``generate`` get the plain reference generation."""

    mode: AuditMode = "all"
    fraction: float = DEFAULT_AUDIT_FRACTION  # the share of prompts ``sample`` generates for

    def __post_init__(self) -> None:
        if self.mode not in AUDIT_MODES:
            raise ValueError(f"unknown audit mode {self.mode!r}; use {' | '.join(AUDIT_MODES)}")
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"audit fraction must be in [0, 1], got {self.fraction}")

    def samples(self, prompt: str) -> bool:
        """Whether ``sample`` generates the reference for ``prompt``: by the prompt's hash, so the
        choice is the same in every cell that sends that prompt (epsilon twins, reruns), and
        a reference one cell made is a cache hit in the others."""
        return int(digest(prompt)[:13], 16) < self.fraction * 16 ** 13


@dataclass
class AuditCounts:
    """References of the generate hook: generated, found in the cache, or skipped (unaudited)."""

    generated: int = 0
    cached: int = 0
    skipped: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"generated": self.generated, "cached": self.cached, "skipped": self.skipped}


@dataclass(frozen=True)
class Response:
    answer: str
    trace: Trace


@dataclass(frozen=True)
class Retrieval:
    """The retrieval side of one query: what the index handed over, what ``score_retrieval``
    returned, the top-k selected, and the context ``rewrite_context`` left for the prompt."""

    candidates: list[Scored]
    rescored: list[Scored]
    selected: list[Scored]
    context: list[Passage]
    hooks: list[HookRecord]
    timings: dict[str, float]


def _items(scored: list[Scored]) -> list[RetrievedItem]:
    return [RetrievedItem(passage_id=s.passage.id, doc_id=s.passage.doc_id, score=s.score) for s in scored]


def _passage_digest(passages: list[Passage]) -> str:
    return digest([[p.id, p.text] for p in passages])


def _scored_digest(scored: list[Scored]) -> str:
    return digest([[s.passage.id, s.passage.text, s.score] for s in scored])


def _passage_content(passages: list[Passage]) -> str:
    """Order-insensitive: the same passages in another order are the same context text."""
    return digest(sorted([p.id, p.text] for p in passages))


def _scored_content(scored: list[Scored]) -> str:
    return digest(sorted([s.passage.id, s.passage.text, s.score] for s in scored))


#: Shorter passages are not flagged as released: a short fragment can occur in an answer by chance.
MIN_RELEASED_CHARS = 24


def released_passages(output: str, passages: list[Passage], before: str = "") -> list[str]:
    """Ids of the passages whose whole (whitespace-normalised) text ``output`` contains verbatim
    and ``before`` (what the hook received) did not."""
    out, prior = " ".join(str(output).split()), " ".join(str(before).split())
    found = []
    for p in passages:
        text = " ".join(p.text.split())
        if len(text) >= MIN_RELEASED_CHARS and text in out and text not in prior:
            found.append(p.id)
    return found


class RAGPipeline:
    def __init__(
        self,
        index: PassageIndex,
        generator: Generator,
        defense: Defense | None = None,
        top_k: int = 5,
        candidate_k: int = 20,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        ctx: RunContext | None = None,
        audit: AuditPolicy | None = None,
    ) -> None:
        self.index = index
        self.generator = generator
        self.defense = defense or Defense()
        self.top_k = top_k
        self.candidate_k = max(candidate_k, top_k)
        self.system_prompt = system_prompt
        self.ctx = ctx or RunContext(noise="fresh")  # no run context: serving users, fresh DP noise
        self.audit = audit or AuditPolicy()
        self.audit_counts = AuditCounts()
        self._prepared = False
        # the generator's settings before any defense code ran (prepare included): the generate
        # hook's reference is computed on these
        self._reference_params = copy.deepcopy(getattr(generator, "params", None))

    def retrieve(self, query: str, history: list[Turn] | tuple[Turn, ...] = (), principal: str | None = None) -> Retrieval:
        """Steps 1-5 of ``answer`` without generation: the defense's retrieval-side hooks on this
        index (what an empirical privacy test of a retrieval-side mechanism runs, many times)."""
        if not self._prepared:
            self.defense.prepare(self.ctx)
            self._prepared = True
        defense, timings, hooks = self.defense, {}, []
        # not traced: the index served, this turn's history (empty = new conversation), the client id
        defense.begin_query(self.index, tuple(history), principal)

        t = time.perf_counter()
        candidates = self.index.search(query, self.candidate_k)
        timings["retrieve"] = time.perf_counter() - t

        # the hook's input is snapshotted before it runs: a hook that mutates its input in place
        # must not change what it is compared against
        before = copy.deepcopy(candidates)
        t = time.perf_counter()
        rescored = list(defense.score_retrieval(query, list(candidates)))
        seconds = time.perf_counter() - t
        selected = select_top_k(rescored, self.top_k)  # stable: ties keep the defense's order
        d_in, d_out = _scored_digest(before), _scored_digest(rescored)
        c_in, c_out = _scored_content(before), _scored_content(rescored)
        # the channel: the top-k the identity's scores select vs the hook's (a monotone rescoring
        # or a pool cap above top-k changes the hook's output, not what is selected)
        channel = "unchanged" if d_in == d_out else retrieval_change(select_top_k(before, self.top_k), selected,
                                                                     permutation=c_in == c_out)
        hooks.append(HookRecord(hook="score_retrieval", digest_in=d_in, digest_out=d_out, content_in=c_in,
                                content_out=c_out, seconds=seconds, channel=channel))
        candidates = before
        passages = [s.passage for s in selected]

        before_passages = copy.deepcopy(passages)
        t = time.perf_counter()
        context = list(defense.rewrite_context(query, list(passages)))
        seconds = time.perf_counter() - t
        d_in, d_out = _passage_digest(before_passages), _passage_digest(context)
        # the channel: the prompt rendered from the hook's passages vs from its input (string formatting)
        channel = "unchanged" if d_in == d_out else prompt_change(
            self._render(query, before_passages, history), self._render(query, context, history),
            before_passages, context)
        hooks.append(HookRecord(hook="rewrite_context", digest_in=d_in, digest_out=d_out,
                                content_in=_passage_content(before_passages), content_out=_passage_content(context),
                                seconds=seconds, channel=channel))
        return Retrieval(candidates=list(candidates), rescored=rescored, selected=selected, context=context,
                         hooks=hooks, timings=timings)

    def _render(self, query: str, passages: list[Passage], history) -> str:
        return self.generator.render(build_rag_messages(query, passages, self.system_prompt, history))

    def answer(self, query: str, history: list[Turn] | tuple[Turn, ...] = (), principal: str | None = None) -> Response:
        """One query through the defense's hooks; ``principal`` is the client id the target was
        told (None: none), for defenses that keep a budget per client."""
        r = self.retrieve(query, history, principal)
        defense = self.defense
        messages = build_rag_messages(query, r.context, self.system_prompt, history)
        prompt = self.generator.render(messages)
        misses_before = getattr(self.generator, "misses", None)

        if defense.overrides("generate"):
            # the reference comes first, on the settings snapshotted before the defense ever ran:
            # a hook that changes the generator's settings must not change its own reference
            reference = self._reference(copy.deepcopy(messages), prompt)
            t = time.perf_counter()
            draft = defense.generate(list(messages), list(r.context), self.generator)
            seconds = time.perf_counter() - t
        else:
            t = time.perf_counter()
            draft = reference = self.generator.generate(messages).text
            seconds = time.perf_counter() - t
        return self._finish(query, history, r, prompt, draft, reference, seconds,
                            lambda: misses_before is not None and getattr(self.generator, "misses") == misses_before)

    def audit_summary(self) -> dict[str, Any]:
        """What a cell record says about the audit: the policy, and the generate hook's references
        (generated, found in the cache, skipped) with the share of its calls that were audited."""
        counts = self.audit_counts.as_dict()
        calls = sum(counts.values())
        return {"mode": self.audit.mode, "fraction": self.audit.fraction, "references": counts,
                "audited_share": round((counts["generated"] + counts["cached"]) / calls, 4) if calls else None}

    def batch_size(self) -> int:
        """How many independent queries ``answer_many`` decodes together: the decoding settings'
        ``batch`` where the generator can batch and the defense's hooks allow it, else 1."""
        size = getattr(getattr(self.generator, "params", None), "batch", 1)
        if size < 2 or not callable(getattr(self.generator, "generate_many", None)) or not self._batchable():
            return 1
        return size

    def _batchable(self) -> bool:
        """Whether batching leaves every hook's inputs as ``answer`` would give them. Batching runs
        the retrieval-side hooks of a batch's later queries before the postprocess of its
        earlier ones, so it is refused for a defense that keeps per-query state
        (``begin_query``), replaces ``generate`` (it decodes its own way: voting, sampling),
        or overrides both a retrieval-side hook and ``postprocess`` (they may share state, a
        noise stream for one, whose draws the reordering would swap)."""
        d = self.defense
        if d.overrides("begin_query") or d.overrides("generate"):
            return False
        return not (d.overrides("postprocess") and (d.overrides("score_retrieval") or d.overrides("rewrite_context")))

    def takes_many(self) -> bool:
        """Whether ``answer_many`` does better than ``answer`` query after query: it decodes in
        batches (``batch_size``), or it puts off the prompts another worker is generating right
        now (``_defers_claimed``)."""
        return self.batch_size() >= 2 or self._defers_claimed()

    def _defers_claimed(self) -> bool:
        return bool(getattr(self.generator, "shares_claims", False)) and self._batchable()

    def answer_many(self, queries: Sequence[str], principal: str | None = None) -> list[Response | Exception]:
        """Independent single-turn queries (no history): each entry is what ``answer(query, (),
        principal)`` returns, or the exception it raises; one query's failure never fails the
        others. Where ``batch_size()`` allows, each group of that many queries is retrieved query
        by query (every hook as in ``answer``), generated in one batch
        (``generator.generate_many``), then post-processed query by query. Unbatched, where the
        hooks allow the same reordering, prompts another worker is generating are put off
        (``_answer_deferring``); otherwise each query goes through ``answer``."""
        size = self.batch_size()
        if size >= 2:
            out: list[Response | Exception] = []
            for start in range(0, len(queries), size):
                out.extend(self._answer_batch(list(queries[start:start + size]), principal))
            return out
        if self._defers_claimed():
            return self._answer_deferring(list(queries), principal)
        return [self._try(lambda q=q: self.answer(q, (), principal)) for q in queries]

    @staticmethod
    def _try(call) -> "Response | Exception":
        try:
            return call()
        except Exception as exc:  # handed back in its query's place; the caller decides what it means
            return exc

    def _answer_batch(self, queries: list[str], principal: str | None) -> list[Response | Exception]:
        out, pending = self._retrieve_each(queries, principal)
        generations = self.generator.generate_many([m for _, _, m, _ in pending]) if pending else []
        if len(generations) != len(pending):  # zip would drop queries and shift every later answer
            raise RuntimeError(f"generate_many returned {len(generations)} results for {len(pending)} prompts")
        return self._finish_each(queries, out, pending, [
            (g, 0.0 if isinstance(g, Exception) else g.seconds) for g in generations])

    def _answer_deferring(self, queries: list[str], principal: str | None) -> list[Response | Exception]:
        """Each prompt generated alone, as ``answer`` generates it, but one that another worker
        is generating right now (``generate_unclaimed`` gives None) is put off until this
        worker's other prompts are done, instead of idling this worker while it waits. Every
        generation starts from a KV state that does not depend on what ran before
        (``LlamaCppGenerator.complete``), so the order changes no text; the hooks keep
        ``answer``'s order (retrieval query by query, then postprocess query by query:
        ``_batchable``). Each query's generate time is its own call's, waits included."""
        out, pending = self._retrieve_each(queries, principal)
        done: list[tuple[Generation | Exception, float] | None] = [None] * len(pending)
        for generate in (self.generator.generate_unclaimed, self.generator.generate):
            for j, (_, _, messages, _) in enumerate(pending):
                if done[j] is not None:
                    continue
                t = time.perf_counter()
                try:
                    generation = generate(messages)
                except CacheCorruptError:  # the cache, not this query: the whole call fails, as batched
                    raise
                except Exception as exc:  # that query's failure, as ``answer_many`` hands it back
                    generation = exc
                if generation is not None:
                    done[j] = (generation, time.perf_counter() - t)
        return self._finish_each(queries, out, pending, done)  # type: ignore[arg-type] - the waiting pass filled all

    def _retrieve_each(self, queries: list[str], principal: str | None):
        """Each query's retrieval hooks in order: (the output list with each failed query's
        exception in place, the (index, retrieval, messages, prompt) of the others)."""
        out: list[Response | Exception | None] = [None] * len(queries)
        pending: list[tuple[int, Retrieval, list, str]] = []
        for i, query in enumerate(queries):
            try:
                r = self.retrieve(query, (), principal)
                messages = build_rag_messages(query, r.context, self.system_prompt, ())
                pending.append((i, r, messages, self.generator.render(messages)))
            except Exception as exc:
                out[i] = exc
        return out, pending

    def _finish_each(self, queries: list[str], out: list, pending: list,
                     generations: "list[tuple[Generation | Exception, float]]") -> list[Response | Exception]:
        """``_finish`` (postprocess and trace) of each pending query in order, from its
        (generation or exception, generate seconds)."""
        counted = getattr(self.generator, "misses", None) is not None
        for (i, r, _, prompt), (generation, seconds) in zip(pending, generations):
            if isinstance(generation, Exception):
                out[i] = generation
                continue
            out[i] = self._try(lambda: self._finish(queries[i], (), r, prompt, generation.text, generation.text,
                                                    seconds, lambda: counted and generation.cached))
        return out  # every query got its response or its exception

    def _finish(self, query: str, history, r: Retrieval, prompt: str, draft: str, reference: str | None,
                seconds: float, cache_hit: Callable[[], bool]) -> Response:
        """The generate hook's record, ``postprocess`` and the trace of one query (``cache_hit``
        is asked after ``postprocess``, which might generate too)."""
        defense, timings, hooks, context = self.defense, dict(r.timings), list(r.hooks), r.context
        timings["generate"] = seconds
        audited = reference is not None
        hooks.append(HookRecord(hook="generate", digest_in=digest(reference) if audited else None,
                                digest_out=digest(draft),
                                content_in=text_key(reference) if audited else None,
                                content_out=text_key(draft),
                                released=released_passages(draft, context, reference) if audited else [],
                                seconds=seconds, channel=text_change(reference, draft)))

        t = time.perf_counter()
        answer = defense.postprocess(query, draft, list(context))
        post_s = time.perf_counter() - t
        hooks.append(HookRecord(hook="postprocess", digest_in=digest(draft), digest_out=digest(answer),
                                content_in=text_key(draft), content_out=text_key(answer),
                                released=released_passages(answer, context, draft), seconds=post_s,
                                channel=text_change(draft, answer)))

        context_scores = {s.passage.id: s.score for s in r.selected}
        trace = Trace(
            query=query,
            turn=len(history),
            defense=defense.name,
            model=self.generator.model_id,
            candidates=_items(r.candidates),
            rescored=_items(r.rescored),
            context=[RetrievedItem(passage_id=p.id, doc_id=p.doc_id, score=context_scores.get(p.id))
                     for p in context],
            prompt=prompt,
            answer=answer,
            hooks=hooks,
            cache_hit=cache_hit(),
            timings=timings,
        )
        return Response(answer=answer, trace=trace)

    def _reference(self, messages, prompt: str) -> str | None:
        """The plain generation the audit compares a ``generate`` hook with, or None where the
        audit policy skips it."""
        counts, policy = self.audit_counts, self.audit
        if policy.mode != "all":
            lookup = getattr(self.generator, "cached", None)
            found = lookup(messages, params=self._reference_params) if lookup is not None else None
            if found is not None:
                counts.cached += 1
                return found.text
            first = counts.generated + counts.cached == 0
            if policy.mode == "off" or not (first or policy.samples(prompt)):
                counts.skipped += 1
                return None
        generation = self.generator.generate(messages, params=self._reference_params)
        if generation.cached:
            counts.cached += 1
        else:
            counts.generated += 1
        return generation.text
