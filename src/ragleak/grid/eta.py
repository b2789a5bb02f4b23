"""A grid's ETA: each cell's seconds from its queries, its prompt and answer lengths and this
machine's measured token rates, then the cells laid out over the workers.

Per cell, ``queries x (prompt tokens / prefill rate + decoded tokens / decode rate)``:

* queries: the budget, or the attack's default for the cell's corpus; an attack of fixed queries
  (``Attack.adaptive`` False) sends at most its whole set;
* prompt tokens: ``FRAME_TOKENS`` plus ``top_k`` passages of the corpus's mean chunk (in
  characters, as the stack chunks it) at ``CHARS_PER_TOKEN``; a conversation's turn carries on
  average one earlier question and answer;
* decoded tokens: the attack's mean answer from ``ANSWERS`` (capped at ``max_tokens``) plus its
  own model's calls; the upper bound decodes every answer and call to ``max_tokens``.

Cells of one generation stream (``grid.streams``) share its generations: the first pays, a twin
costs nothing here. Not priced: a voting defense's several sequences per answer (dp-vote,
private-rag), answers a defense lengthens or shortens, an attack that ends before its budget
(IKEA often does), and each cell's setup (index, metrics). ``benchmarks/bench_eta.py`` measures
how far that leaves the estimate from a real run (``docs/dry-run.md``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable

from ragleak.attacks import ATTACKS
from ragleak.attacks.base import MULTI_TURNS
from ragleak.corpora import load_corpus
from ragleak.corpora.chunking import chunk_documents
from ragleak.errors import RagleakError
from ragleak.grid.schedule import simulated_makespan
from ragleak.grid.spec import CellSpec
from ragleak.grid.streams import carries_answers, stream_chains, stream_key

log = logging.getLogger(__name__)

# Token counts below were measured on this project's runs with the default model
# (qwen2.5-coder-0.5b, greedy, max_tokens 256, one thread), 2026-12-04..06.
# the default model's tokenizer on the chunks of synthetic-corp, synthetic-email and chatterbot-qa
# (150 documents each, 2026-12-07): 2.96, 2.90 and 4.26 characters per token (2.35, 2.67 and 1.38
# tokens per word: characters vary less); the passages are the dense kind that dominates a prompt
CHARS_PER_TOKEN = 3.0
PASSAGE_LINE_TOKENS = 4  # each passage's "Passage i:" label and line break
# system prompt, template and the question: the median prompt of a question sent without
# passages (72-87 tokens for PS and RAG-Thief: grid run 'obs-ca-dp-bare')
FRAME_TOKENS = 80
QUESTION_TOKENS = 25  # a question in a conversation's history (PS pool prompts: 15-25 words)
# attack: (mean target answer tokens, the attack's own model calls per query, mean tokens per call)
ANSWERS: dict[str, tuple[float, float, float]] = {
    "ps": (74.1, 0.0, 0.0),  # grid run 'mth-table2-ps': 72 answers
    "pm": (32.8, 0.0, 0.0),  # grid run 'plan-completions': 5 answers
    "mi": (81.7, 0.0, 0.0),  # grid run 'mth-table2-mi-paper': 330 answers
    "canary": (103.1, 0.0, 0.0),  # grid run 'mth-canary-email': 50 answers
    # grid run 'obs-agents-default-budget': 261, 80 and 33 answers; reflections, optimizer and
    # question-writer calls per query and their lengths from the same cells
    "rag-thief": (112.8, 0.133, 282.7),
    "deal": (137.4, 0.3, 164.2),
    "ikea": (87.6, 1.758, 47.1),
    # bench_mi's seed-1 design pilots at max_tokens 64, synthetic-corp and chatterbot-qa (2026-12-07):
    # 48 answers, each with one reference continuation by the attacker's model
    "mi-entailment": (43.2, 1.0, 42.8),
}
UNMEASURED_ANSWER = 0.5  # an attack not in ANSWERS: half of max_tokens per answer, no own calls


@dataclass(frozen=True)
class Rates:
    """Tokens per second of one model on this machine (``ragleak models --bench``)."""

    prefill_tok_s: float
    decode_tok_s: float


@dataclass(frozen=True)
class CellCost:
    """What one cell's generations cost, in tokens."""

    queries: int
    prompt_tokens: float
    answer_tokens: float
    own_calls: float  # the attack's own model calls per query
    own_tokens: float  # tokens decoded per such call
    max_tokens: int

    @property
    def model_calls(self) -> float:
        return self.queries * (1 + self.own_calls)

    def seconds(self, rates: Rates) -> float:
        decoded = self.answer_tokens + self.own_calls * self.own_tokens
        return self.queries * (self.prompt_tokens / rates.prefill_tok_s + decoded / rates.decode_tok_s)

    def upper_seconds(self, rates: Rates) -> float:
        decoded = self.max_tokens * (1 + self.own_calls)
        return self.queries * (self.prompt_tokens / rates.prefill_tok_s + decoded / rates.decode_tok_s)


class Estimator:
    """``CellCost`` of a cell; the corpus reads behind it are memoised per corpus and attack."""

    def __init__(self) -> None:
        self._memo: dict[tuple, tuple[int | None, float]] = {}

    def _corpus(self, cell: CellSpec, attack) -> tuple[int | None, float]:
        """(the attack's whole query set for this corpus or None, prompt passage tokens)."""
        s = cell.stack
        key = (cell.attack, repr(cell.attack_params), cell.corpus, repr(cell.corpus_params), cell.seed,
               s.top_k, s.chunk_words, s.chunk_overlap)
        if key not in self._memo:
            try:
                indexed, view = attack.prepare_corpus(load_corpus(cell.corpus, **cell.corpus_params), cell.seed)
                chunks = [len(p.text) for p in chunk_documents(indexed, s.chunk_words, s.chunk_overlap)
                          if p.text.strip()]
                mean = sum(chunks) / max(len(chunks), 1) / CHARS_PER_TOKEN + PASSAGE_LINE_TOKENS
                self._memo[key] = (attack.budget_for(view), min(s.top_k, len(chunks)) * mean)
            except RagleakError as exc:  # the cell itself will record the error; price it at its budget
                log.info("eta: %s: %s; pricing its budget at a full context", cell.label, exc)
                self._memo[key] = (None, s.top_k * s.chunk_words * 2.5)  # the densest corpus's tokens per word
        return self._memo[key]

    def __call__(self, cell: CellSpec) -> CellCost:
        attack = ATTACKS.get(cell.attack)(**cell.attack_params)
        whole, passages = self._corpus(cell, attack)
        queries = cell.budget or whole or attack.default_budget
        if not attack.adaptive and whole is not None:
            queries = min(queries, whole)
        cap = cell.stack.decoding.max_tokens
        answer, calls, per_call = ANSWERS.get(cell.attack, (UNMEASURED_ANSWER * cap, 0.0, 0.0))
        answer = min(answer, cap)
        prompt = FRAME_TOKENS + passages
        if carries_answers(cell):  # turn t of MULTI_TURNS carries t earlier turns: on average
            prompt += (MULTI_TURNS - 1) / 2 * (QUESTION_TOKENS + answer)
        return CellCost(queries, prompt, answer, calls, min(per_call, cap), cap)


@dataclass(frozen=True)
class GridEta:
    """A grid's dry-run numbers; seconds None where the rates of a model are not measured."""

    cells: int
    streams: int
    model_calls: int
    workers: int
    expected_s: float | None
    upper_s: float | None
    missing_rates: tuple[str, ...] = ()


def stored_rates(cells: Iterable[CellSpec]) -> dict[str, Rates]:
    """The measured rates (``rag.speed``) of each model the cells run, where stored."""
    from ragleak.rag.speed import stored_speed

    out = {}
    for model, threads in {(c.stack.model, c.stack.n_threads or 1) for c in cells}:
        row = stored_speed(model, threads)
        if row is not None:
            out[model] = Rates(row["prefill_tok_s"], row["decode_tok_s"])
    return out


def cell_seconds(cells: Iterable[CellSpec], rates: dict[str, Rates],
                 estimate: Estimator | None = None) -> dict[str, tuple[float, float]]:
    """(expected, upper) seconds of each cell id: its stream's first cell pays the stream's
    generations; a twin, already in the cache, costs 0. ``rates``: by model name."""
    estimate = estimate or Estimator()
    out: dict[str, tuple[float, float]] = {}
    seen: set[tuple] = set()
    for cell in cells:
        key = stream_key(cell)
        if key in seen:
            out[cell.cell_id] = (0.0, 0.0)
            continue
        seen.add(key)
        cost, r = estimate(cell), rates[cell.stack.model]
        out[cell.cell_id] = (cost.seconds(r), cost.upper_seconds(r))
    return out


def grid_eta(cells: list[CellSpec], rates: dict[str, Rates], workers: int = 1) -> GridEta:
    """The dry run's ETA of ``cells`` on ``workers``: the makespan of the runner's dispatch order
    (``grid.schedule``) with each cell at its ``cell_seconds``, expected and at the cap."""
    estimate = Estimator()
    chains = stream_chains(cells, lambda c: 0.0)
    calls = round(sum(estimate(chain[0]).model_calls for chain in chains))
    missing = tuple(sorted({c.stack.model for c in cells} - set(rates)))
    if missing:
        return GridEta(len(cells), len(chains), calls, workers, None, None, missing)
    seconds = cell_seconds(cells, rates, estimate)
    ordered = sorted(chains, key=lambda chain: -seconds[chain[0].cell_id][0])  # the runner's order
    expected = simulated_makespan(ordered, lambda chain: seconds[chain[0].cell_id][0], workers)
    upper = simulated_makespan(ordered, lambda chain: seconds[chain[0].cell_id][1], workers)
    return GridEta(len(cells), len(chains), calls, workers, expected, upper)
