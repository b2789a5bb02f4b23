"""The dry-run plan of a grid: its cells, the distinct generation streams they need, the model
calls those streams make, and an ETA from this machine's measured token rates.

A *generation stream* is the sequence of generations one cell makes; cells with the same stream
share every generation through the run's cache, so only the first pays. Two cells have the same
stream when they send the same queries through the same generation path:

* same attack (and parameters), corpus, seed, budget and stack; the mode too, where the grid's
  mode reaches the attack's queries (PM runs its own conversations, so its mode axis is inert);
* the same defense, parameters and *applied* epsilon (an epsilon the defense ignores is inert);
  or, for a defense that acts only after generation (``postprocess``), the baseline's stream -
  but only when the attack's queries are fixed in advance and no prompt carries an earlier
  answer (``Attack.stream_shape``): an adaptive attack or a conversation sees the defended
  answers, so its later prompts differ from the baseline's.

Estimates, stated as such: queries per cell are the budget (or the attack's default for the
cell's corpus; an attack of fixed queries sends at most its whole set); model calls are the
target's plain generations, the attack's own calls per query
(``StreamShape.attacker_calls_per_query``) and the audit's reference generations under the run's
``--audit`` policy; a voting defense decodes ``Defense.voting().prompts`` sequences per query.

The ETA is two numbers, at the rates ``ragleak models --bench`` measured for the stack's model:

* *expected*: each target prompt as long as the cell's corpus really makes it (``grid.tokens``:
  its passages tokenized by the model's tokenizer, ``top_k`` of them, the rendered system prompt
  and template; a conversation's turn also carries on average one earlier question and answer;
  the question as long as the attack's bare prompts were observed to make it, else
  ``QUERY_WORDS`` words),
  decoding as long as that attack's answers were observed to be (``grid.completions``: a run
  given with ``--observe``, else the table measured on this project's runs; under a defense that
  changes what the model reads, as observed under that defense where it was); an attacker call at
  its observed length, else at its decode cap (``StreamShape.attacker_max_tokens``); a voting
  defense's answer as that defense's answers to that attack were observed to run
  (``grid.completions.VotingStats``: prompts, passages and lock-step steps per answer; private-rag
  leaves the slots of irrelevant documents empty), else as its ``VotingShape``: every prompt
  prefilled (the frame, and its share of the passages dealt to the voters), as many steps as the
  attack's answers have tokens but at most the defense's ``max_new_tokens``; each step at the
  measured cost of a lock-step step of that many sequences (``rag.speed.lockstep_ratio``; one
  decoded token per sequence where the rates hold no such measurement); and, where the
  observations hold the attack's
  cells, only the share of its budget it sent, with its observed attacker calls per query;
  a defense with a context budget (``Defense.context_budget``: ca-dp's per-client budget)
  answers the queries after it with the bare question: priced without passages (prompt and
  answer as the attack's bare questions were observed, ``bare`` role, else the target prompt
  less its passages and the attack's answer length), a repeat free, and a fixed attack's bare
  turns that no passage reaches (a conversation begun with passages carries their answers)
  paid once by the cells (at each epsilon) that send them;
* *upper bound*: the same prompts, every decode run to its cap (``max_tokens``), every query of
  the budget sent, attacker calls at the larger of the declared and observed rate, a voting
  answer at its shape, one decoded token per sequence and step.

``eta_basis`` says which rates, prompt counts and completion observations each number rests on,
and which (attack, role, model) had no observation (priced at the cap in both).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ragleak.attacks import ATTACKS
from ragleak.attacks.base import MULTI_TURNS, Attack, StreamShape
from ragleak.corpora import load_corpus
from ragleak.defenses import defense_class
from ragleak.defenses.base import VotingShape
from ragleak.errors import RagleakError
from ragleak.grid.completions import CompletionTable, VotingStats, generation_prompts_repeat, stored_table
from ragleak.grid.schedule import simulated_makespan, stream_chains
from ragleak.grid.spec import CellSpec, GridConfig
from ragleak.grid.tokens import QUERY_WORDS, TOKENS_PER_WORD, PromptTokenCounter, PromptTokens
from ragleak.rag.speed import lockstep_ratio, speed_key, stored_speed

log = logging.getLogger(__name__)

PROMPT_OVERHEAD_TOKENS = 100  # system prompt, template and the query, when the corpus cannot be read
# a conversation's turn t (0-based, MULTI_TURNS per conversation) carries t earlier turns: on average
HISTORY_TURNS = (MULTI_TURNS - 1) / 2
# an answer sentence's length when pricing per-sentence likelihood passes (an assumption: ~20 words)
TOKENS_PER_SENTENCE = 20 * TOKENS_PER_WORD


def sentences(tokens: float) -> float:
    """Sentences of an answer of ``tokens`` tokens, at least one (``TOKENS_PER_SENTENCE``)."""
    return max(1.0, tokens / TOKENS_PER_SENTENCE)


def stream_kind(shape: StreamShape) -> str:
    return f"{'adaptive' if shape.adaptive else 'fixed'}/{'multi' if shape.carries_answers else 'single'}"


def stream_key(cell: CellSpec, shape: StreamShape) -> tuple:
    """What a cell's generations depend on (see the module docstring)."""
    shares_baseline = (defense_class(cell.defense).acts_after_generation_only()
                       and not shape.adaptive and not shape.carries_answers)
    path: Any = "baseline" if shares_baseline else (
        cell.defense, repr(sorted(cell.defense_params.items())), cell.applied_epsilon)
    return (cell.attack, repr(cell.attack_params), cell.corpus, repr(cell.corpus_params),
            cell.mode if shape.mode_matters else "-", cell.seed, cell.budget, repr(cell.stack),
            repr(getattr(cell, "target", None)), path)


class _Queries:
    """Queries per cell: its budget, or the attack's default for the cell's corpus; an attack of
    fixed queries (``Attack.adaptive`` False: PS's pool, MI's probes) sends at most that whole
    set whatever its budget (memoised)."""

    def __init__(self) -> None:
        self._memo: dict[tuple, int | None] = {}

    def __call__(self, cell: CellSpec, attack: Attack) -> int:
        if cell.budget is not None and attack.adaptive:
            return cell.budget
        key = (cell.attack, repr(cell.attack_params), cell.corpus, repr(cell.corpus_params), cell.seed)
        if key not in self._memo:
            try:
                _, view = attack.prepare_corpus(load_corpus(cell.corpus, **cell.corpus_params), cell.seed)
                self._memo[key] = attack.budget_for(view)
            except RagleakError as exc:  # the cell itself will record the error; plan it at its budget
                log.info("plan: %s: %s; counting its budget", cell.label, exc)
                self._memo[key] = None
        whole = self._memo[key]
        if cell.budget is None:
            return attack.default_budget if whole is None else whole
        return cell.budget if whole is None else min(cell.budget, whole)


@dataclass(frozen=True)
class CellEstimate:
    """A cell's generation stream and what the stream costs when it runs first (its twins then
    find every generation in the cache)."""

    cell: CellSpec
    key: tuple
    kind: str
    queries: int
    model_calls: float
    generations: float  # plain generations' worth of decoding
    target_generations: float = 0.0  # plain target generations (audit references included)
    sequences: float = 0.0  # sequences a defense replacing generate decodes (its VotingShape's prompts per query)
    attacker_calls: float = 0.0
    attacker_max_tokens: int | None = None  # None: the stack's max_tokens
    carries_answers: bool = False
    likelihood_passes: float = 0.0  # the attack's prefill-only passes over answer sentences, at the cap
    likelihood_per_sentence: float = 0.0  # StreamShape.likelihood_passes_per_sentence
    voting: VotingShape | None = None  # how a voting defense decodes an answer
    context_budget: int | None = None  # Defense.context_budget: queries answered with passages (None: all)


class Estimator:
    """``CellEstimate`` of each cell of a grid run under ``audit`` (``GridConfig.audit``, fraction)."""

    def __init__(self, audit: str = "sample", audit_fraction: float = 0.1) -> None:
        self.references = {"all": 1.0, "sample": audit_fraction, "off": 0.0}[audit]
        self._queries = _Queries()

    def __call__(self, cell: CellSpec) -> CellEstimate:
        attack = ATTACKS.get(cell.attack)(**cell.attack_params)
        shape = attack.stream_shape(cell.mode)
        defense = defense_class(cell.defense)(**cell.defense_kwargs())
        queries = self._queries(cell, attack)
        own = defense.overrides("generate")
        target = queries * (self.references if own else 1.0)
        attacker = queries * shape.attacker_calls_per_query
        voting = defense.voting() if own else None
        sequences = queries * (voting.prompts if voting is not None else 1.0) if own else 0.0
        per_sentence = shape.likelihood_passes_per_sentence
        likelihood = queries * per_sentence * sentences(cell.stack.decoding.max_tokens)
        return CellEstimate(cell, stream_key(cell, shape), stream_kind(shape), queries, target + attacker + likelihood,
                            target + attacker + sequences, target, sequences, attacker,
                            shape.attacker_max_tokens, shape.carries_answers, likelihood, per_sentence, voting,
                            defense.context_budget())


def distinct_streams(estimates: Iterable[CellEstimate]) -> list[CellEstimate]:
    """The first estimate of each generation stream, in order: the cell that pays for the
    stream's generations (its twins read them from the cache)."""
    first: dict[tuple, CellEstimate] = {}
    for e in estimates:
        first.setdefault(e.key, e)
    return list(first.values())


def plan_summary(config: GridConfig, cells: list[CellSpec] | None = None,
                 completions: CompletionTable | None = None, tokens: PromptTokenCounter | None = None,
                 workers: int = 1) -> dict:
    """What a dry run prints: the cells; the distinct generation streams, overall and per attack
    kind (adaptive or fixed queries, single prompts or prompts carrying answers); the model calls
    and generation work of those streams; and an ETA where this machine's rates are known
    (expected, from ``completions`` - default: the stored table - and an upper bound), on one
    worker and on ``workers`` (``workers_eta``)."""
    cells = config.expand() if cells is None else cells
    estimate = Estimator(config.audit, config.audit_fraction)
    estimates = [estimate(cell) for cell in cells]
    streams = distinct_streams(estimates)
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: {"cells": 0, "streams": 0})
    for e in estimates:
        kinds[e.kind]["cells"] += 1
    for e in streams:
        kinds[e.kind]["streams"] += 1
    completions = completions if completions is not None else stored_table()
    tokens = tokens or PromptTokenCounter()
    eta = EtaModel(completions, tokens)
    expected, upper, basis = eta(streams)
    by_id = {cell.cell_id: e for cell, e in zip(cells, estimates)}
    parallel = eta
    if workers > 1:  # the same streams at the rates of ``workers`` models running at once
        parallel = EtaModel(completions, tokens, workers)
        parallel(streams)
    return {
        "cells": len(cells), "distinct_generation_streams": len(streams),
        "shared_by_cache": len(cells) - len(streams),
        "by_kind": {k: dict(v) for k, v in sorted(kinds.items())},
        "queries": sum(s.queries for s in streams),
        "model_calls": round(sum(s.model_calls for s in streams)),
        "generations": round(sum(s.generations for s in streams)),
        "audit": {"mode": config.audit, "fraction": config.audit_fraction},
        "model_calls_expected": round(eta.expected_calls),
        "eta_s": expected, "eta_upper_s": upper, "eta_basis": basis,
        "workers_eta": workers_eta(cells, lambda cell: by_id[cell.cell_id], parallel, streams, workers),
        "plan": [c.label for c in cells],
    }


def workers_eta(cells: list[CellSpec], estimate, eta: EtaModel, streams: list[CellEstimate], workers: int) -> dict:
    """The wall-clock ETA on ``workers`` workers: the grid's cells handed out as the runner hands
    them out (``grid.schedule``: first cells costliest first, then the twins), each stream's first
    cell taking the seconds ``eta`` priced ``streams`` at (the rates measured with ``workers``
    models running at once)."""
    out: dict[str, Any] = {"workers": workers, "eta_s": None, "eta_upper_s": None,
                           "rates": eta.rates}
    if len(eta.seconds) < len(streams):
        out["hint"] = (f"no rates of {workers} models running at once on this machine: "
                       f"`ragleak grid --dry-run --workers {workers}` measures them")
        return out
    chains = stream_chains(cells, estimate)
    for i, label in ((0, "eta_s"), (1, "eta_upper_s")):
        out[label] = round(simulated_makespan(chains, lambda chain: eta.seconds[estimate(chain[0]).key][i], workers))
    out["assumes"] = ("workers share nothing but the generation cache; a twin waits for its stream's first cell; "
                      "generation time only")
    return out


@dataclass(frozen=True)
class GenerationPrice:
    """Tokens of one generation: prompt and decoded, expected and at the caps."""

    prompt: float
    completion: float
    prompt_upper: float
    completion_upper: float

    def expected_split(self, speed: dict) -> tuple[float, float]:
        """Expected seconds of (prefill, decode)."""
        return self.prompt / speed["prefill_tok_s"], self.completion / speed["decode_tok_s"]

    def seconds(self, speed: dict) -> tuple[float, float]:
        """(expected, upper) seconds."""
        return (sum(self.expected_split(speed)),
                self.prompt_upper / speed["prefill_tok_s"] + self.completion_upper / speed["decode_tok_s"])


class EtaModel:
    """Seconds on one worker for a plan's streams (see the module docstring), at the rates
    measured with ``copies`` models running at once (one per worker); ``seconds`` keeps each
    stream's (expected, upper) after a call. The streams are distinct (``distinct_streams``)."""

    def __init__(self, completions: CompletionTable, tokens: PromptTokenCounter, copies: int = 1,
                 shared_cache: bool = True) -> None:
        self.completions = completions
        # False: price every stream as if no generation cache served another's (a benchmark's
        # no-cache plan), so no bare tail is shared either
        self.shared_cache = shared_cache
        self.tokens = tokens
        self.copies = copies
        self.seconds: dict[tuple, tuple[float, float]] = {}
        self.rates: dict[str, dict] = {}
        self._used: dict[str, dict] = {}
        self._unobserved: set[str] = set()
        self._prompts: dict[str, dict] = {}
        self._calls_used: dict[str, dict] = {}
        self._calls_other_version: dict[str, dict] = {}
        self._queries: dict[str, dict] = {}  # per attack: streams, queries budgeted and expected sent
        self._voting_used: dict[str, dict] = {}
        self._no_lockstep: set[str] = set()
        self._bare_from: dict[int, tuple[int, int | None]] = {}  # _bare_tails of the streams priced
        self._bare_used: dict[str, dict] = {}  # per defense: context-budget streams, generations with and without
        self._bare_as_target: set[str] = set()  # (attack, bare, model) unobserved: priced as its answers with passages
        self._questions: dict[str, float] = {}  # per attack/model: observed question tokens beyond the frame's
        self.expected_calls = 0.0

    def _speed(self, model: str, threads: int) -> dict | None:
        """The stored rates of ``model`` with ``self.copies`` copies at once. A model beside
        others runs no faster than alone: a several-copy rate measured above the one-copy rate
        (two separate timings, seen 4% the wrong way round) is capped at it, and says so."""
        speed = stored_speed(model, threads, self.copies)
        alone = stored_speed(model, threads, 1) if self.copies > 1 and speed is not None else None
        if alone is None:
            return speed
        capped = [k for k in ("prefill_tok_s", "decode_tok_s") if speed[k] > alone[k]]
        if not capped:
            return speed
        return {**speed, **{k: alone[k] for k in capped}, "capped_at_one_copy": capped}

    def _prompt_tokens(self, cell: CellSpec) -> PromptTokens | None:
        stack = cell.stack
        counted = self.tokens(cell.corpus, cell.corpus_params, stack)
        params = ", ".join(f"{k}={v}" for k, v in sorted(cell.corpus_params.items()))
        label = f"{cell.corpus}{f' ({params})' if params else ''} @ {stack.model}"
        if counted is not None and label not in self._prompts:
            self._prompts[label] = {"prompt_tokens": round(counted.prompt), "passages": counted.passages,
                                    "passage_tokens": round(counted.passage_tokens, 1), "top_k": counted.top_k,
                                    "frame_tokens": counted.frame_tokens, "tokenizer": counted.tokenizer}
        return counted

    def _passage_tokens(self, cell: CellSpec) -> float:
        """Tokens the retrieved passages add to a target prompt of ``cell`` (what a bare question lacks)."""
        counted = self._prompt_tokens(cell)
        if counted is None:
            return TOKENS_PER_WORD * cell.stack.top_k * cell.stack.chunk_words
        return counted.prompt - counted.frame_tokens

    def _completion(self, attack: str, role: str, model: str, cap: int, defense: str | None = None) -> float:
        """Expected decoded tokens: the observed mean (never above ``cap``), else ``cap``; a target
        answer under ``defense`` as observed under that defense where it was
        (``CompletionTable.target_under``), else as observed at all."""
        under = self.completions.target_under(defense, attack, model) if defense and role == "target" else None
        stats = under or self.completions.get(attack, role, model)  # type: ignore[arg-type]
        label = f"{attack}/{role}/{model}" + (f" under {defense}" if under else "")
        if stats is None:
            self._unobserved.add(label)
            return float(cap)
        self._used[label] = {"median": stats.completion_median, "mean": stats.completion_mean, "n": stats.n,
                             "at_cap": stats.at_cap}
        return min(stats.completion_mean, float(cap))

    def _question_excess(self, cell: CellSpec, frame: float) -> float:
        """Tokens by which the attack's questions exceed the frame's assumed one: its observed bare
        prompts (the frame and its question, no passages) less ``frame``; 0 where unobserved."""
        stats = self.completions.get(cell.attack, "bare", cell.stack.model)
        if stats is None or stats.prompt_median is None:
            return 0.0
        excess = max(stats.prompt_median - frame, 0.0)
        self._questions[f"{cell.attack}/{cell.stack.model}"] = round(excess, 1)
        return excess

    def _bare(self, s: CellEstimate, target: GenerationPrice, answer: float) -> GenerationPrice:
        """One bare question of stream ``s`` (``bare`` role): its prompt as observed (the frame and
        the attack's own question, which may be long: MI's probes quote a document), else the
        target prompt without its passages; its answer as observed, else ``answer``, the attack's
        answers with passages (noted in the basis). The upper bound stays the target's."""
        cell, model = s.cell, s.cell.stack.model
        stats = self.completions.get(cell.attack, "bare", model)
        prompt = target.prompt - self._passage_tokens(cell)
        if stats is None:
            self._bare_as_target.add(f"{cell.attack}/bare/{model}")
            completion = answer
        else:
            completion = self._completion(cell.attack, "bare", model, cell.stack.decoding.max_tokens)
            if not s.carries_answers and stats.prompt_median is not None:
                prompt = stats.prompt_median  # observed without history; a conversation's turn adds its own
        return GenerationPrice(prompt=prompt, completion=completion, prompt_upper=target.prompt_upper,
                               completion_upper=target.completion_upper)

    def _voting(self, defense: str, attack: str, model: str) -> VotingStats | None:
        """The observed voting answers of (``defense``, ``attack``, ``model``), noted in the basis
        when used."""
        stats = self.completions.voting_for(defense, attack, model)
        if stats is not None:
            self._voting_used[f"{defense}/{attack}/{model}"] = stats.row()
        return stats

    def prices(self, s: CellEstimate, answer: float, speed: dict | None = None) -> tuple[
            GenerationPrice, GenerationPrice, GenerationPrice, GenerationPrice | None]:
        """(a target generation, an attacker call, an answer's likelihood passes, one sequence of a
        voting defense's answer or None) of stream ``s`` whose target answers are expected
        ``answer`` tokens long (``_completion``); ``speed``: the rates, whose lock-step
        measurement (``rag.speed.lockstep_ratio``) prices a voting answer's steps."""
        cell, stack = s.cell, s.cell.stack
        cap = stack.decoding.max_tokens
        counted = self._prompt_tokens(cell)
        if counted is None:
            base = TOKENS_PER_WORD * stack.top_k * stack.chunk_words + PROMPT_OVERHEAD_TOKENS
            frame, query = float(PROMPT_OVERHEAD_TOKENS), QUERY_WORDS * TOKENS_PER_WORD
        else:
            base, frame = counted.prompt, float(counted.frame_tokens)
            query = QUERY_WORDS * TOKENS_PER_WORD  # an earlier question in the history
        # the attack's own questions, where its bare prompts were observed longer than the frame's
        # QUERY_WORDS-word question (an MI probe quotes half a document)
        longer = self._question_excess(cell, frame)
        base, query, asked = base + longer, query + longer, frame + longer
        history = HISTORY_TURNS if s.carries_answers else 0.0
        prompt_upper = base + history * (query + cap)
        voted = None
        if s.voting is not None:  # its prompts are built afresh (no prefix reuse), its answers short
            v = s.voting
            passage = counted.passage_tokens if counted is not None else TOKENS_PER_WORD * stack.chunk_words
            shaped = asked + v.passages / v.prompts * passage  # a prompt's frame and its share of the passages
            own, steps = shaped, min(answer, float(v.max_new_tokens))
            # one of the shape's ``prompts`` sequences; observed answers (``VotingStats``) fill fewer
            # and stop sooner: the expected price is the observed answer spread over the shape's slots
            fill, n = 1.0, float(v.prompts)
            observed = self._voting(cell.defense, cell.attack, stack.model)
            if observed is not None and observed.prompts_mean > 0:
                fill, n = min(observed.prompts_mean / v.prompts, 1.0), min(observed.prompts_mean, float(v.prompts))
                own = asked + min(observed.passages_mean, v.passages) / observed.prompts_mean * passage
                steps = min(observed.steps_mean, float(v.max_new_tokens))
            # a lock-step step of n sequences costs ratio(n) one-sequence steps (measured), shared
            # by the shape's slots; unmeasured: one decoded token per sequence
            ratio = lockstep_ratio(speed, n) if speed is not None else None
            if ratio is None:
                self._no_lockstep.add(stack.model)
            decoded = fill * steps if ratio is None else steps * ratio / v.prompts
            voted = GenerationPrice(prompt=fill * (own + history * (query + steps)), completion=decoded,
                                    prompt_upper=shaped + history * (query + v.max_new_tokens),
                                    completion_upper=v.max_new_tokens)
        if stack.decoding.reuse_prefix:
            # the prefix-reuse mode keeps the system message's state from the call before, and a
            # conversation's history but its last exchange: a turn after the first prefills that
            # exchange, its own message and the context (in a conversation of MULTI_TURNS). The
            # upper bound reuses nothing (a worker's first call, or another role's call between)
            history = (1 - 1 / MULTI_TURNS) if s.carries_answers else 0.0
            base -= counted.system_tokens if counted is not None else 0
        target = GenerationPrice(prompt=base + history * (query + answer), completion=answer,
                                 prompt_upper=prompt_upper, completion_upper=cap)
        attacker_cap = s.attacker_max_tokens or cap
        stats = self.completions.get(cell.attack, "attacker", stack.model) if s.attacker_calls else None
        own = self._completion(cell.attack, "attacker", stack.model, attacker_cap) if s.attacker_calls else 0.0
        # an agent's prompt: its instructions (about a system prompt's length) and the answer it reads
        prompt = stats.prompt_median if stats is not None and stats.prompt_median is not None else frame + answer
        attacker = GenerationPrice(prompt=prompt, completion=own,
                                   prompt_upper=prompt if stats is not None else frame + cap,
                                   completion_upper=attacker_cap)
        # an answer's likelihood passes: one per sentence, each reading the attack's prompt (no
        # context) and that sentence, decoding nothing (priced per answer)
        likelihood = GenerationPrice(prompt=sentences(answer) * frame + answer, completion=0.0,
                                     prompt_upper=sentences(cap) * frame + cap, completion_upper=0.0)
        return target, attacker, likelihood, voted

    def calls(self, s: CellEstimate, answer: float) -> tuple[float, float, float, float, float, float]:
        """(target-side, attacker) calls of stream ``s``: expected, then upper, then the expected
        answers whose sentences get likelihood passes (the upper bound: every query's), then the
        expected bare generations (below). Expected scales by the queries the attack was observed
        to send under the stream's budget (``AttackCalls.expected_queries``: an attack that ended
        on its own sends no more under a larger budget) and uses its observed attacker calls per
        query; the upper bound is the full budget at the larger of declared and observed. Where a
        query sent again is the same prompt (``generation_prompts_repeat``), the expected target
        generations leave out the observed share of repeats. Observations of another version of
        the attack than the installed one are not used. ``answer``: the expected answer length in
        tokens.

        A defense with a context budget (``Defense.context_budget``) answers the queries after it
        with the bare question: those are the last value, not in the first (priced at the
        passage-free prompt by ``__call__``), their repeats are cache hits (no noise reaches a bare
        prompt: the attack's observed share of repeated bare questions, else of repeated
        queries under a defense whose prompts repeat), and a fixed attack's bare turns that no
        passage reaches are paid once by the streams that send them (``_bare_tails``; keyed by the
        estimate's identity)."""
        observed = self.completions.calls.get(s.cell.attack)
        target = s.target_generations + s.sequences
        scored = s.queries if s.likelihood_per_sentence else 0.0
        installed = ATTACKS.get(s.cell.attack).version
        if observed is not None and observed.version not in (None, installed):
            self._calls_other_version[s.cell.attack] = {"observed": observed.version, "installed": installed}
            observed = None
        share, repeat, bare_repeat, per_query = 1.0, 0.0, 0.0, None
        if observed is not None and s.queries > 0:
            self._calls_used[s.cell.attack] = observed.row()
            sent, rests_on = observed.expected_queries(round(s.queries), s.cell.corpus)
            share = min(sent / s.queries, 1.0)
            repeat = observed.repeat_share(s.queries * share)
            bare_repeat = observed.repeat_share(s.queries * share, bare=True)
            row = self._queries.setdefault(s.cell.attack, {"streams": 0, "budgeted": 0.0, "expected": 0.0,
                                                           "from": set()})
            row["streams"] += 1
            row["budgeted"] += s.queries
            row["expected"] += s.queries * share
            row["from"].add(rests_on)
            # the observed calls of the attack's own model include its likelihood passes
            per_query = max(observed.attacker_per_query - s.likelihood_per_sentence * sentences(answer), 0.0)
        # the expected plain target generations: the queries sent, less those the cache serves
        plain = s.target_generations * share
        if repeat and generation_prompts_repeat(s.cell.defense, s.carries_answers):
            plain *= 1 - repeat  # a query the cell sent before: the cache serves it
        bare = 0.0
        if s.context_budget is not None and s.queries > 0:
            sent_queries = s.queries * share
            per = s.target_generations / s.queries  # plain generations per query
            with_context = min(float(s.context_budget), sent_queries)
            # the queries of its bare tail this stream pays for (``_bare_tails``): [start, end)
            start, end = self._bare_from.get(id(s), (s.context_budget, None))
            tail = max(min(sent_queries, float("inf") if end is None else end) - start, 0.0)
            bare = tail * per * (1 - bare_repeat if not s.carries_answers else 1.0)
            plain = with_context * per
            used = self._bare_used.setdefault(s.cell.defense, {"streams": 0, "with_context": 0.0, "bare": 0.0})
            used["streams"] += 1
            used["with_context"] += with_context * per
            used["bare"] += bare
        attacker = attacker_upper = s.attacker_calls
        if per_query is not None:
            attacker = s.queries * share * per_query
            attacker_upper = s.queries * max(s.attacker_calls / s.queries, per_query)
        return plain + s.sequences * share, attacker, target, attacker_upper, scored * share, bare

    def _bare_tails(self, streams: list[CellEstimate]) -> dict[int, tuple[int, int | None]]:
        """The queries [start, end) (end None: to the stream's last) of each context-budget stream's
        bare tail that it pays for (``calls``). A fixed attack sends the same questions in every
        stream that differs only in its defense path (a ca-dp cell at each epsilon), so its bare
        prompts are the same in all of them wherever no earlier passage reaches them: from the
        budget on in single prompts; in conversations (``MULTI_TURNS`` turns, the history carried),
        from the first conversation that starts after the budget, since a conversation begun with
        passages carries their answers into its bare turns. The stream of the smallest budget
        pays its whole tail; each other pays only the bare turns of its conversation begun with
        passages (none in single prompts). Other streams pay their own tail (an adaptive attack's
        questions follow the answers, which differ while passages are given)."""
        if not self.shared_cache:
            return {}
        groups: dict[tuple, list[CellEstimate]] = defaultdict(list)
        for s in streams:
            if s.context_budget is not None and s.kind in ("fixed/single", "fixed/multi"):
                groups[s.key[:-1]].append(s)
        tails: dict[int, tuple[int, int | None]] = {}
        for members in groups.values():
            first = min(members, key=lambda m: m.context_budget)
            for m in members:
                budget = m.context_budget
                turns = MULTI_TURNS if m.kind == "fixed/multi" else 1
                clean = -(-budget // turns) * turns  # the first conversation with no passage in it
                tails[id(m)] = (budget, None) if m is first else (budget, clean)
        return tails

    def __call__(self, streams: list[CellEstimate]) -> tuple[float | None, float | None, dict]:
        expected = upper = 0.0
        missing, rates = set(), {}
        self.expected_calls = 0.0
        self.seconds = {}
        self._no_lockstep = set()
        self._queries = {}
        self._bare_from = self._bare_tails(streams)
        self._bare_used = {}
        self._bare_as_target = set()
        self._questions = {}
        # where the time goes: per attack (expected, upper) and the expected prefill/decode split
        by_attack: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        by_defense: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        split = [0.0, 0.0]
        for s in streams:
            stack = s.cell.stack
            answer = self._completion(s.cell.attack, "target", stack.model, stack.decoding.max_tokens, s.cell.defense)
            t_calls, a_calls, t_calls_up, a_calls_up, scored, bare = self.calls(s, answer)
            # a voting defense's sequences are decoding work, not model calls
            plain = s.target_generations / max(s.target_generations + s.sequences, 1e-9)
            self.expected_calls += (t_calls * plain + bare + a_calls
                                    + scored * s.likelihood_per_sentence * sentences(answer))
            threads = stack.n_threads or 1
            speed = self._speed(stack.model, threads)
            if speed is None:
                missing.add(stack.model)
                continue
            rates[f"{stack.model}@{speed_key(threads, self.copies)}"] = {
                k: speed[k] for k in ("prefill_tok_s", "decode_tok_s", "measured_at", "load_1m", "capped_at_one_copy")
                if k in speed}
            target, attacker, likelihood, voted = self.prices(s, answer, speed)
            sequence = voted or target  # a defense replacing generate without voting: a plain generation
            # a bare question: the prompt without passages
            bare_price = self._bare(s, target, answer) if bare else target
            t_exp, t_up = target.seconds(speed)
            v_exp, v_up = sequence.seconds(speed)
            a_exp, a_up = attacker.seconds(speed)
            l_exp, l_up = likelihood.seconds(speed)
            passes = scored * s.likelihood_per_sentence
            stream_expected = (t_calls * (plain * t_exp + (1 - plain) * v_exp) + bare * bare_price.seconds(speed)[0]
                               + a_calls * a_exp + passes * l_exp)
            stream_upper = (t_calls_up * (plain * t_up + (1 - plain) * v_up) + a_calls_up * a_up
                            + s.queries * s.likelihood_per_sentence * l_up)
            expected += stream_expected
            upper += stream_upper
            self.seconds[s.key] = (stream_expected, stream_upper)
            by_attack[s.cell.attack][0] += stream_expected
            by_attack[s.cell.attack][1] += stream_upper
            by_defense[s.cell.defense][0] += stream_expected
            by_defense[s.cell.defense][1] += stream_upper
            for price, count in ((target, t_calls * plain), (sequence, t_calls * (1 - plain)), (bare_price, bare),
                                 (attacker, a_calls), (likelihood, passes)):
                prefill_s, decode_s = price.expected_split(speed)
                split[0] += count * prefill_s
                split[1] += count * decode_s
        self.rates = rates
        basis: dict[str, Any] = {
            "rates": rates, "prompt_tokens": self._prompts,
            "completions": {"source": self.completions.source,
                            "earlier_sources": list(self.completions.earlier_sources), "used": dict(sorted(self._used.items())),
                            "unobserved_at_cap": sorted(self._unobserved),
                            "calls_used": dict(sorted(self._calls_used.items())),
                            "calls_of_another_attack_version": dict(sorted(self._calls_other_version.items())),
                            # attacks whose observed cells sent less than their budgets (they end on their own)
                            "queries_sent": {a: {"streams": r["streams"], "budgeted": round(r["budgeted"]),
                                                 "expected": round(r["expected"], 1), "from": sorted(r["from"])}
                                             for a, r in sorted(self._queries.items())
                                             if r["expected"] < r["budgeted"]},
                            "voting_used": dict(sorted(self._voting_used.items())),
                            # bare answers nobody observed, priced at the attack's answers with passages
                            "bare_unobserved_as_target": sorted(self._bare_as_target),
                            # tokens an attack's questions add beyond the frame's, from its bare prompts
                            "question_tokens_beyond_frame": dict(sorted(self._questions.items()))},
            # defenses that answer only their first queries with passages: the rest priced bare
            "context_budget": {d: {"streams": u["streams"], "with_context": round(u["with_context"], 1),
                                   "bare": round(u["bare"], 1)} for d, u in sorted(self._bare_used.items())},
            "assumes": "expected: corpus-measured prompts, observed mean completions (the cap where unobserved), "
                       "observed share of the budget sent and attacker calls per query (declared where unobserved); "
                       "a context-budget defense's later queries as bare questions (observed where they were); "
                       "upper bound: every decode to its cap; a voting defense's prompts each prefilled with its "
                       "share of the passages, its lock-step steps at one decoded token per sequence (expected: "
                       "its observed prompts, passages and steps per answer, the caps where unobserved, each "
                       "step at the measured cost of a lock-step step of that many sequences); a likelihood pass per answer sentence (one per "
                       f"{TOKENS_PER_SENTENCE:.0f} answer tokens, at least one) at the prefill of its prompt "
                       "and that sentence; "
                       "one worker, generation time only",
        }
        if self._no_lockstep:
            basis["lockstep_unmeasured"] = sorted(self._no_lockstep)  # voting steps priced per sequence
        batched = sum(1 for s in streams if s.cell.stack.decoding.batch > 1)
        if batched:
            # a batch's steps shrink as its answers end, which the observations do not show: no
            # credit, so these streams' expected time errs high
            basis["batched_streams_priced_one_at_a_time"] = batched
        if missing:
            basis["missing"] = sorted(missing)
            basis["hint"] = ("measure this machine's rates with `ragleak models --bench` (threads 1 for grid workers)"
                             if self.copies == 1 else f"measure the rates of {self.copies} copies at once "
                             f"(`ragleak grid --dry-run --workers {self.copies}` does)")
            return None, None, basis
        basis["by_attack"] = {a: {"expected_s": round(e), "upper_s": round(u)}
                              for a, (e, u) in sorted(by_attack.items(), key=lambda kv: -kv[1][0])}
        basis["by_defense"] = {d: {"expected_s": round(e), "upper_s": round(u)}
                               for d, (e, u) in sorted(by_defense.items(), key=lambda kv: -kv[1][0])}
        basis["expected_split_s"] = {"prefill": round(split[0]), "decode": round(split[1])}
        return round(expected), round(upper), basis
