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
    # the detectors this defense finds what it removes with (``nlp.recognizers`` names, and the
    # models or Presidio recognizers it runs): a metric that shares one is marked not independent
    # of it on its cells, and a built-in metric may not share one with a built-in defense
    detectors: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def acts_after_generation_only(cls) -> bool:
        """Whether every hook of this defense is ``postprocess``: the model reads what it would
        read undefended, so the defense's generations are the undefended ones."""
        return set(cls.hooks) <= {"postprocess"}

    def __init__(self, params: DefenseParams | None = None, **kwargs) -> None:
        # constructors store parameters only; heavy work belongs in prepare()
        self.params = build_params(type(self), "defense", params, kwargs)
        self.ctx = RunContext(noise="fresh")  # until prepare(): as deployed, fresh DP noise

    def prepare(self, ctx: RunContext) -> None:
        """Called once by the pipeline before the first query, with the run's context."""
        self.ctx = ctx

    def begin_query(self, index: "PassageIndex", history: Sequence[Turn], principal: str | None = None) -> None:
        """Before each query's retrieval (not traced); the base defense keeps no per-query state."""

    def state(self) -> dict[str, Any]:
        """What this defense did in the run, for the cell record; the base defense did nothing."""
        return {}

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        return candidates

    def rewrite_context(self, query: str, passages: list[Passage]) -> list[Passage]:
        return passages

    def generate(self, messages: Sequence[ChatMessage], passages: list[Passage], generator: Generator) -> str:
        return generator.generate(messages).text

    def postprocess(self, query: str, answer: str, passages: list[Passage]) -> str:
        return answer

    def guarantee(self) -> Guarantee:
        """The privacy guarantee this defense claims, in three slots. The baseline claims none."""
        return Guarantee(notes="no defense: no formal guarantee")

    def overrides(self, hook: HookName) -> bool:
        """True when this class replaces the base implementation of ``hook``."""
        return getattr(type(self), hook) is not getattr(Defense, hook)
