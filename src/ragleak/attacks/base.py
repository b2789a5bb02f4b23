"""The Attack contract and the Transcript it produces.

An attack is a class with declared metadata (``name``, ``version``, ``threat_model``,
``default_budget``) and frozen pydantic ``Params``. Its constructor stores parameters only;
``run(target, ctx, budget, corpus_view, mode)`` drives queries through a ``QuerySession`` and returns
a ``Transcript``: every query with its answer, the retrieved ids and trace when the target
exposes them, every failed call (recorded and counted, never raised, never leakage), and the
attack's own state (what it believes it extracted, membership scores, ...).

Two structural rules keep an attack honest:

* it talks to the corpus only through ``QuerySession.ask`` (which wraps the target), and
* it sees only the *attacker view* of the ``CorpusView`` (``documents`` its threat model grants,
  e.g. the candidates an MI attacker tests, and an optional ``topic``). Ground truth used for
  scoring (``member_ids``, ``secrets``) is applied by ``label()`` after the queries are done.

The run's ``RunContext`` carries the seed and the ``Stack``: an attack with models of its own
(an attacker LLM, an encoder) takes them from ``ctx.require_stack(...)``, never builds them.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ragleak.context import RunContext
from ragleak.errors import ConfigError, RagleakError
from ragleak.params import build_params
from ragleak.pipeline.conversation import Conversation
from ragleak.pipeline.target import Target
from ragleak.records import Document, Record, TargetResponse, Trace, digest

log = logging.getLogger(__name__)

TRANSCRIPT_SCHEMA_VERSION = 1

ThreatModel = Literal["black-box", "needs-retrieved-ids"]
#: How an attack's single queries reach the target (the grid's ``mode`` axis): each in a fresh
#: session, or chained into conversations of ``MULTI_TURNS`` turns, so the history travels with
#: every later turn (ca-dp charges its budget per client id, or the whole stream, in either mode).
SessionMode = Literal["single", "multi"]
MULTI_TURNS = 3  # PM's default conversation length (our choice: Mind the Hook does not state one)

# What a failing target call may raise. Targets are outside our control (an HTTP endpoint, a user
# callable, a pipeline with a user defense): these are recorded as errors, not crashes.
TARGET_FAILURES: tuple[type[BaseException], ...] = (RagleakError, TimeoutError, ConnectionError, OSError)
try:  # httpx is an optional dependency of the HTTP target
    import httpx

    TARGET_FAILURES = TARGET_FAILURES + (httpx.HTTPError,)
except ImportError:  # pragma: no cover - depends on the environment
    pass


class AttackParams(BaseModel):
    """Parameters of an attack: frozen and JSON-round-trippable, so a cell spec is hashable."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class CorpusView(Record):
    """What an attack is granted about the corpus, beyond query access.

    ``documents`` and ``topic`` are the attacker's knowledge (MI candidates to test; a domain
    keyword). ``member_ids`` and ``secrets`` are scoring ground truth: the base class hides them
    from the query logic and uses them only in ``Attack.label``.
    """

    documents: list[Document] = Field(default_factory=list)
    topic: str | None = None
    member_ids: list[str] | None = None
    secrets: list[str] = Field(default_factory=list)

    def attacker_view(self) -> "CorpusView":
        return CorpusView(documents=self.documents, topic=self.topic)


#: What became of one query. ``failed``: the call raised (dead endpoint, timeout, a prompt longer
#: than the model's window): nothing is known about what the target would have released, so it is
#: never scored. ``refused``: the target itself reported that it declined the query
#: (``TargetResponse.refused``); it did respond, so the refusal is scored as what it released.
#: ``answered``: any other response. An empty answer or one that merely reads like a refusal is
#: ``answered``: telling those apart from the text would take a phrase list, which this
#: classification must not rest on.
Outcome = Literal["answered", "failed", "refused"]


class QueryRecord(Record):
    """One call to the target: what was asked, what came back (or the error)."""

    index: int
    query: str
    answer: str | None = None
    retrieved_ids: list[str] | None = None
    trace: Trace | None = None
    error: str | None = None
    refused: bool = False
    phase: str = "attack"
    conversation: int | None = None
    turn: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """The target responded (answered or refused); a failed call is not ok."""
        return self.error is None

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            return "failed"
        return "refused" if self.refused else "answered"


class MembershipScore(Record):
    """One MI candidate: its scores by scorer name, and (after labelling) whether it is a member."""

    doc_id: str
    scores: dict[str, float]
    member: bool | None = None


class Transcript(BaseModel):
    """Everything one attack run did and believes; JSON round-trips exactly."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = TRANSCRIPT_SCHEMA_VERSION
    attack: str
    attack_version: str
    threat_model: ThreatModel
    mode: SessionMode = "single"
    params: dict[str, Any]
    seed: int
    budget: int
    target: str
    exposes_retrieved_ids: bool
    queries: list[QueryRecord] = Field(default_factory=list)
    errors: int = 0
    extracted: list[str] = Field(default_factory=list, description="what the attack believes it extracted")
    membership: list[MembershipScore] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict, description="attack-specific state (JSON)")
    scoring: dict[str, Any] = Field(default_factory=dict, description="ground-truth labelling, filled after the queries")
    seconds: float = 0.0
    stopped: str | None = Field(default=None, description="why the session stopped before its budget "
                                "(the target's errors were sustained); None: it ran its course")

    @property
    def answered(self) -> list[QueryRecord]:
        """Every query the target responded to (outcome ``answered`` or ``refused``): what every
        metric reads. Failed queries are never among them."""
        return [q for q in self.queries if q.ok]

    def outcomes(self) -> dict[Outcome, int]:
        """How many queries were answered, refused and failed (each query counted once)."""
        out: dict[Outcome, int] = {"answered": 0, "refused": 0, "failed": 0}
        for q in self.queries:
            out[q.outcome] += 1
        return out

    def release_digest(self) -> str:
        """A digest of what the target released, query by query and in order: each query's text,
        outcome, answer and retrieved ids. No timing, trace timestamp or error text enters it, so
        two runs that differ only where nothing reached the target's output (an inert epsilon, a
        rerun) share it; it is the fingerprint the report deduplicates cells by."""
        return digest([[q.query, q.outcome, q.answer, q.retrieved_ids] for q in self.queries])

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Transcript":
        return cls.model_validate_json(text)


class QuerySession:
    """The attack's only door to the corpus: a budgeted, recording wrapper around a target.

    In ``multi`` mode, ``ask`` sends each query as the next turn of a rolling conversation that
    restarts every ``turns`` turns; conversations an attack opens itself are unaffected.

    A target with a ``stop_rule`` (``pipeline.target.StopRule``: endpoints) is queried until its errors
    are sustained; then ``stopped`` says why and nothing more is sent (``remaining`` is 0).
    """

    def __init__(self, target: Target, budget: int, seed: int, mode: SessionMode = "single",
                 turns: int = MULTI_TURNS) -> None:
        if mode not in ("single", "multi"):
            raise ConfigError(f"session mode must be 'single' or 'multi', got {mode!r}")
        if turns < 1:
            raise ConfigError(f"turns per conversation must be >= 1, got {turns}")
        self.target = target
        self.budget = budget
        self.seed = seed
        self.mode: SessionMode = mode
        self.turns = turns
        self.records: list[QueryRecord] = []
        self._conversations = 0
        self._rolling: Conversation[QueryRecord | None] | None = None
        self._stop_rule = getattr(target, "stop_rule", None)
        self.stopped: str | None = None

    @property
    def used(self) -> int:
        return len(self.records)

    @property
    def remaining(self) -> int:
        return 0 if self.stopped else max(0, self.budget - self.used)

    @property
    def exposes_retrieved_ids(self) -> bool:
        return bool(getattr(self.target, "exposes_retrieved_ids", False))

    def ask(self, query: str, phase: str = "attack") -> QueryRecord | None:
        """One query (single mode: a fresh session; multi: the rolling conversation's next turn);
        None when the budget is spent (nothing is sent)."""
        if self.mode == "multi":
            if self._rolling is None or self._rolling.asked >= self.turns:
                self._rolling = self.conversation()
            return self._rolling.ask(query, phase=phase)
        return self._call(query, phase, lambda: self.target.answer(query, ()), None, 0)

    def conversation(self) -> "Conversation[QueryRecord | None]":
        """A new multi-turn conversation whose turns are recorded (and budgeted) by this session;
        ``ask(query, phase=...)``; a failed turn is recorded and leaves the history unchanged."""
        self._conversations += 1
        return Conversation(_SessionDoor(self, self._conversations - 1), self._conversations - 1)

    def ask_many(self, queries: Sequence[str], phases: Sequence[str]) -> list[QueryRecord | None]:
        """Independent queries (none depends on another's answer): the records ``ask`` would make
        sending them one after another, in the same order (None once the budget is spent).
        Where the target does better with independent queries together (its ``takes_many``:
        batched decoding, or putting off prompts another worker is generating; single mode; no
        stop rule, which must see each outcome before the next query is sent) they go to its
        ``answer_many``, and each query is charged an equal share of that call's time."""
        if len(queries) != len(phases):
            raise ValueError("one phase per query")
        if (self.mode != "single" or self._stop_rule is not None or not getattr(self.target, "takes_many", False)
                or not callable(getattr(self.target, "answer_many", None))):
            # stop asking once the budget is spent, as a loop that checks ``remaining`` would
            return [self.ask(query, phase=phase) if self.remaining > 0 else None
                    for query, phase in zip(queries, phases)]
        n = min(self.remaining, len(queries))
        out: list[QueryRecord | None] = []
        if n > 0:
            t0 = time.perf_counter()
            responses = self.target.answer_many(list(queries[:n]))
            share = (time.perf_counter() - t0) / n
            for query, phase, response in zip(queries, phases, responses):
                out.append(self._record(query, phase, response, None, 0, share))
        return out + [None] * (len(queries) - len(out))

    def _call(self, query, phase, call, conversation, turn) -> QueryRecord | None:
        if self.remaining <= 0:
            return None
        t0 = time.perf_counter()
        try:
            response: TargetResponse | BaseException = call()
        except TARGET_FAILURES as exc:
            response = exc
        return self._record(query, phase, response, conversation, turn, time.perf_counter() - t0)

    def _record(self, query, phase, response: "TargetResponse | BaseException", conversation, turn,
                seconds: float) -> QueryRecord:
        """Record one query's outcome; an exception that is not a target failure is raised."""
        index = self.used
        if isinstance(response, BaseException):
            if not isinstance(response, TARGET_FAILURES):
                raise response
            error = f"{type(response).__name__}: {response}"
            log.warning("query %d failed: %s", index, error)
            record = QueryRecord(index=index, query=query, error=error, phase=phase, conversation=conversation,
                                 turn=turn, seconds=seconds)
        else:
            record = QueryRecord(index=index, query=query, answer=response.answer,
                                 retrieved_ids=response.retrieved_ids, trace=response.trace,
                                 refused=response.refused, phase=phase,
                                 conversation=conversation, turn=turn, seconds=seconds)
        self.records.append(record)
        if self._stop_rule is not None and not record.ok:
            why = self._stop_rule.reason([r.ok for r in self.records])
            if why:
                self.stopped = f"stopped after {self.used} of {self.budget} queries: {why} (last error: {record.error})"
                log.warning("%s", self.stopped)
        return record


class _SessionDoor:
    """One conversation's way through the session: each turn goes to the target with the history
    and is recorded under the conversation's number (the ``Conversation`` keeps the history)."""

    def __init__(self, session: QuerySession, number: int) -> None:
        self.session = session
        self.number = number
        self.turns = 0

    def answer(self, query: str, history: tuple, phase: str = "attack") -> QueryRecord | None:
        record = self.session._call(query, phase, lambda: self.session.target.answer(query, history), self.number,
                                    self.turns)
        if record is not None:
            self.turns += 1
        return record


class AttackResult(BaseModel):
    """What ``Attack.execute`` hands back to the base class."""

    model_config = ConfigDict(extra="forbid")

    extracted: list[str] = Field(default_factory=list)
    membership: list[MembershipScore] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)


class Attack(ABC):
    """Base class of every attack (built-in or third-party)."""

    name: ClassVar[str]
    version: ClassVar[str]
    threat_model: ClassVar[ThreatModel] = "black-box"
    default_budget: ClassVar[int]
    description: ClassVar[str] = ""
    Params: ClassVar[type[AttackParams]] = AttackParams

    def __init__(self, params: AttackParams | None = None, **kwargs: Any) -> None:
        # constructors store parameters only; models and pools are loaded in run()
        self.params = build_params(type(self), "attack", params, kwargs)

    #: whether a query depends on earlier answers; unknown attacks count as adaptive, so the grid
    #: never shares generations between cells that cannot have them (``grid.streams``)
    adaptive: ClassVar[bool] = True
    #: whether it runs its own conversations (PM): the grid's mode never reaches its queries, and
    #: its prompts carry earlier answers
    own_conversations: bool = False

    def budget_for(self, view: CorpusView) -> int:
        """The default query budget (MI scales it with the number of candidates)."""
        return self.default_budget

    def prepare_corpus(self, documents: list[Document], seed: int) -> tuple[list[Document], CorpusView]:
        """What a grid cell indexes and what the attack may know about it (MI holds out
        non-members; the canary protocol plants its canaries). By default: everything is indexed
        and the attacker is granted nothing beyond query access."""
        return documents, CorpusView()

    def run(self, target: Target, ctx: RunContext, budget: int | None = None,
            corpus_view: CorpusView | None = None, mode: SessionMode = "single") -> Transcript:
        view = corpus_view or CorpusView()
        if self.threat_model == "needs-retrieved-ids" and not getattr(target, "exposes_retrieved_ids", False):
            raise ConfigError(f"attack {self.name!r} needs a target that exposes retrieved ids")
        budget = self.budget_for(view) if budget is None else budget
        if budget < 0:
            raise ConfigError(f"budget must be >= 0, got {budget}")
        session = QuerySession(target, budget, ctx.seed, mode=mode)
        t0 = time.perf_counter()
        result = self.execute(session, view.attacker_view(), ctx)
        transcript = Transcript(
            attack=self.name, attack_version=self.version, threat_model=self.threat_model, mode=mode,
            params=self.params.model_dump(mode="json"), seed=ctx.seed, budget=budget,
            target=getattr(target, "name", type(target).__name__),
            exposes_retrieved_ids=session.exposes_retrieved_ids, queries=session.records,
            errors=sum(1 for r in session.records if not r.ok), extracted=result.extracted,
            membership=result.membership, state=result.state, seconds=time.perf_counter() - t0,
            stopped=session.stopped,
        )
        return self.label(transcript, view)

    @abstractmethod
    def execute(self, session: QuerySession, view: CorpusView, ctx: RunContext) -> AttackResult:
        """Drive queries through ``session`` (at most its budget) and report what was learnt;
        models of the attack's own come from ``ctx.require_stack(...)``."""

    def label(self, transcript: Transcript, view: CorpusView) -> Transcript:
        """Attach scoring ground truth after the queries (MI member labels; canary hits)."""
        if view.member_ids is not None and transcript.membership:
            members = set(view.member_ids)
            transcript.membership = [m.model_copy(update={"member": m.doc_id in members}) for m in transcript.membership]
        if view.secrets:
            transcript.scoring["secrets"] = secret_hits(transcript, view.secrets)
        return transcript

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "params": self.params.model_dump(mode="json")}


def secret_hits(transcript: Transcript, secrets: list[str]) -> dict[str, list[int]]:
    """For each secret, the indices of the answered queries whose answer contains it exactly.

    Failed calls have no answer and so can never count as a hit.
    """
    return {s: [q.index for q in transcript.queries if q.answer is not None and s in q.answer] for s in secrets}
