"""RAGPipeline: retrieve, select top-k, prompt + generate, post-process, through four hooks.

Every call returns the answer and a ``Trace``: candidate and selected passages with scores, the
exact prompt, and for each hook a digest of what the identity hook would have passed on next to
a digest of what the defense passed on. The generate hook's identity is the plain generator on
the same prompt; when a defense replaces ``generate`` the pipeline also computes that reference
(through the cache, so a baseline run that already made it costs nothing) - otherwise the audit
could not tell a generation defense that acts from one that only claims to.

That reference is a full plain generation per query, most of the cost of a private-rag or
dp-vote query, so ``AuditPolicy`` says when to pay for it: ``all`` (every query), ``sample``
(a reference already in the cache, plus a fixed share of prompts chosen by their hash, plus the
pipeline's first) or ``off`` (only references already in the cache). An unaudited call's hook
record has ``digest_in`` None. The answer never depends on the policy, only the trace does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from ragleak.context import RunContext
from ragleak.defenses.base import Defense
from ragleak.rag.generator import Generator
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


def _items(scored: list[Scored]) -> list[RetrievedItem]:
    return [RetrievedItem(passage_id=s.passage.id, doc_id=s.passage.doc_id, score=s.score) for s in scored]


def _passage_digest(passages: list[Passage]) -> str:
    return digest([[p.id, p.text] for p in passages])


def _scored_digest(scored: list[Scored]) -> str:
    return digest([[s.passage.id, s.passage.text, s.score] for s in scored])


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
        self.ctx = ctx or RunContext()
        self.audit = audit or AuditPolicy()
        self.audit_counts = AuditCounts()
        self._prepared = False

    def answer(self, query: str, history: list[Turn] | tuple[Turn, ...] = ()) -> Response:
        if not self._prepared:
            self.defense.prepare(self.ctx)
            self._prepared = True
        defense, timings, hooks = self.defense, {}, []
        # not traced: the index served and this turn's history (empty = new conversation)
        defense.begin_query(self.index, tuple(history))

        t = time.perf_counter()
        candidates = self.index.search(query, self.candidate_k)
        timings["retrieve"] = time.perf_counter() - t

        t = time.perf_counter()
        rescored = list(defense.score_retrieval(query, list(candidates)))
        hooks.append(HookRecord(hook="score_retrieval", digest_in=_scored_digest(candidates),
                                digest_out=_scored_digest(rescored), seconds=time.perf_counter() - t))

        # stable sort: ties keep the defense's order
        selected = sorted(rescored, key=lambda s: -s.score)[: self.top_k]
        passages = [s.passage for s in selected]

        t = time.perf_counter()
        context = list(defense.rewrite_context(query, list(passages)))
        hooks.append(HookRecord(hook="rewrite_context", digest_in=_passage_digest(passages),
                                digest_out=_passage_digest(context), seconds=time.perf_counter() - t))

        messages = build_rag_messages(query, context, self.system_prompt, history)
        prompt = self.generator.render(messages)
        misses_before = getattr(self.generator, "misses", None)

        t = time.perf_counter()
        if defense.overrides("generate"):
            draft = defense.generate(messages, context, self.generator)
            seconds = time.perf_counter() - t
            reference = self._reference(messages, prompt)
        else:
            draft = reference = self.generator.generate(messages).text
            seconds = time.perf_counter() - t
        timings["generate"] = seconds
        hooks.append(HookRecord(hook="generate", digest_in=None if reference is None else digest(reference),
                                digest_out=digest(draft), seconds=seconds))

        t = time.perf_counter()
        answer = defense.postprocess(query, draft, context)
        hooks.append(HookRecord(hook="postprocess", digest_in=digest(draft), digest_out=digest(answer),
                                seconds=time.perf_counter() - t))

        cache_hit = misses_before is not None and getattr(self.generator, "misses") == misses_before
        context_scores = {s.passage.id: s.score for s in selected}
        trace = Trace(
            query=query,
            turn=len(history),
            defense=defense.name,
            model=self.generator.model_id,
            candidates=_items(candidates),
            rescored=_items(rescored),
            context=[RetrievedItem(passage_id=p.id, doc_id=p.doc_id, score=context_scores.get(p.id))
                     for p in context],
            prompt=prompt,
            answer=answer,
            hooks=hooks,
            cache_hit=cache_hit,
            timings=timings,
        )
        return Response(answer=answer, trace=trace)

    def _reference(self, messages, prompt: str) -> str | None:
        """The plain generation the audit compares a ``generate`` hook with, or None where the
        audit policy skips it."""
        counts, policy = self.audit_counts, self.audit
        if policy.mode != "all":
            lookup = getattr(self.generator, "cached", None)
            found = lookup(messages) if lookup is not None else None
            if found is not None:
                counts.cached += 1
                return found.text
            first = counts.generated + counts.cached == 0
            if policy.mode == "off" or not (first or policy.samples(prompt)):
                counts.skipped += 1
                return None
        generation = self.generator.generate(messages)
        if generation.cached:
            counts.cached += 1
        else:
            counts.generated += 1
        return generation.text
