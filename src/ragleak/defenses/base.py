"""The Defense base class: four hooks on the pipeline path, identity by default.

A defense overrides the hooks it acts on and lists them in ``hooks``. The pipeline calls all
four on every query and records a digest of what each passed on (``records.HookRecord``), so the
audit can tell a hook that really changed its input from one that did not.

=================  ====================================================  ============================
hook               signature                                             may change
=================  ====================================================  ============================
score_retrieval    (query, candidates: list[Scored]) -> list[Scored]     scores, ranking, which docs
rewrite_context    (query, passages: list[Passage]) -> list[Passage]     the text the LLM sees
generate           (messages, passages, generator) -> str                token generation itself
postprocess        (query, answer, passages) -> str                      the released text
=================  ====================================================  ============================

Two more methods are not hooks (the audit does not inventory them) and are no-ops by default:
``begin_query(index, history, principal)`` runs before each query's retrieval (the index served,
the turn's history, empty for a new conversation, and the client id the target was told, None
when it was told none: budgets per principal and per-corpus state live there), and ``state()``
reports what the defense did in a run, for the grid's cell record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from pydantic import BaseModel, ConfigDict

from ragleak.accounting.guarantee import Guarantee
from ragleak.context import RunContext
from ragleak.params import build_params
from ragleak.rag.generator import Generator
from ragleak.rag.prompt import ChatMessage
from ragleak.records import HookName, Passage, Scored, Turn

if TYPE_CHECKING:
    from ragleak.rag.index import PassageIndex


class VotingShape(BaseModel):
    """One answer of a voting defense, as the dry run prices it: ``prompts`` sequences (the
    voters' and a public one) prefilled one by one in one context, holding ``passages`` retrieved
    passages between them (each passage reaches one prompt; the public prompt none), then at most
    ``max_new_tokens`` lock-step steps of every sequence."""

    model_config = ConfigDict(frozen=True)

    prompts: int
    passages: int
    max_new_tokens: int


class VotingUse(BaseModel):
    """What a voting defense's answers really decoded, summed over a run's answers: the shape's
    counts at their use (private-rag leaves the voter slots of irrelevant documents empty; an
    answer stops at its end token), so the dry run prices a voting answer as it runs
    (``grid.completions.voting_use``), not at ``VotingShape``'s caps."""

    answers: int = 0
    prompts: int = 0  # sequences prefilled (the public one included)
    passages: int = 0  # passages those prompts held
    steps: int = 0  # lock-step steps (next-token evaluations of every sequence)

    def plus(self, prompts: int, passages: int, steps: int) -> "VotingUse":
        return VotingUse(answers=self.answers + 1, prompts=self.prompts + prompts,
                         passages=self.passages + passages, steps=self.steps + steps)


class DefenseParams(BaseModel):
    """Parameters of a defense: frozen and JSON-round-trippable, so a cell spec is hashable."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Defense:
    name: ClassVar[str] = "none"
    version: ClassVar[str] = "1"
    hooks: ClassVar[frozenset[HookName]] = frozenset()
    Params: ClassVar[type[DefenseParams]] = DefenseParams
    # the parameter a grid's epsilon axis sets (the defense's headline epsilon); None: the axis
    # is inert for this defense and its cells at different epsilons share their generations
    epsilon_param: ClassVar[str | None] = None
    # whether a query sent again in a cell reaches the generator as the same prompt (no noise
    # drawn before generation), so the generation cache serves the repeat; None: only where the
    # defense acts after generation alone (``repeats_prompts``). Checked by the defense contract
    # test, which sends a query twice; the dry run's ETA prices repeats as free where it holds.
    prompts_repeat: ClassVar[bool | None] = None

    @classmethod
    def acts_after_generation_only(cls) -> bool:
        """Whether every hook of this defense is ``postprocess``: the model reads what it would
        read undefended, so the defense's generations are the undefended ones."""
        return set(cls.hooks) <= {"postprocess"}

    @classmethod
    def repeats_prompts(cls) -> bool:
        """Whether a query sent again reaches the generator as the same prompt (``prompts_repeat``)."""
        return cls.prompts_repeat if cls.prompts_repeat is not None else cls.acts_after_generation_only()

    def __init__(self, params: DefenseParams | None = None, **kwargs) -> None:
        # constructors store parameters only; heavy work belongs in prepare()
        self.params = build_params(type(self), "defense", params, kwargs)
        self.ctx = RunContext()

    def prepare(self, ctx: RunContext) -> None:
        """Called once by the pipeline before the first query, with the run's context."""
        self.ctx = ctx

    def begin_query(self, index: "PassageIndex", history: Sequence[Turn], principal: str | None = None) -> None:
        """Before each query's retrieval (not traced); the base defense keeps no per-query state."""

    def state(self) -> dict[str, Any]:
        """What this defense did in the run, for the cell record; the base defense did nothing."""
        return {}

    def context_budget(self) -> int | None:
        """How many queries of one client (a target told one principal, or none) this defense
        answers with retrieved passages before it answers every later query with none; None:
        every query gets its passages. A query past the budget is the bare question (and its
        history): no noise, no corpus, so the cache serves it again for any cell that sends it.
        The dry run prices those queries so; the defense contract test sends ``budget + 2``
        queries and checks that the prompts say so."""
        return None

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        return candidates

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        return passages

    def generate(self, messages: Sequence[ChatMessage], passages: list[Passage], generator: Generator) -> str:
        return generator.generate(messages).text

    def postprocess(self, query: str, answer: str, passages: list[Passage]) -> str:
        return answer

    def voting(self) -> "VotingShape | None":
        """How this defense decodes an answer when it replaces ``generate`` with lock-step voting
        (for the dry-run's ETA); None: the plain generator's one generation."""
        return None

    def record_voting(self, prompts: int, passages: int, steps: int) -> None:
        """Count one voting answer as it ran (``VotingUse``); a voting defense calls it per answer."""
        self._voting_used = self.voting_used.plus(prompts, passages, steps)

    @property
    def voting_used(self) -> VotingUse:
        """The voting answers this defense decoded so far (none for a defense that does not vote)."""
        return getattr(self, "_voting_used", None) or VotingUse()

    def guarantee(self) -> Guarantee:
        """The privacy guarantee this defense claims, in three slots. The baseline claims none."""
        return Guarantee(notes="no defense: no formal guarantee")

    def overrides(self, hook: HookName) -> bool:
        """True when this class replaces the base implementation of ``hook``."""
        return getattr(type(self), hook) is not getattr(Defense, hook)
