"""Records that cross module boundaries: documents, passages, traces, target responses.

All are pydantic models so they validate on the way in and serialise to JSON a reader can open.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

MetaValue = str | int | float | bool | None


class Record(BaseModel):
    """Frozen, strict-by-default base for every record."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Document(Record):
    """One source document of a corpus, before chunking."""

    id: str = Field(min_length=1)
    text: str
    metadata: dict[str, MetaValue] = Field(default_factory=dict)


class Passage(Record):
    """One indexed chunk of a document; the unit of retrieval."""

    id: str = Field(min_length=1, description="'{doc_id}#{chunk_number}'")
    doc_id: str = Field(min_length=1)
    text: str
    metadata: dict[str, MetaValue] = Field(default_factory=dict)


class Scored(Record):
    """A retrieval candidate: a passage and its similarity score (higher is more relevant)."""

    passage: Passage
    score: float


class Turn(Record):
    """One exchange of a conversation."""

    query: str
    answer: str


HookName = Literal["score_retrieval", "rewrite_context", "generate", "postprocess"]
HOOK_NAMES: tuple[HookName, ...] = ("score_retrieval", "rewrite_context", "generate", "postprocess")
#: A hook call's effect on the channel it feeds (``pipeline.channel_keys``): ``changed``,
#: ``reordered`` (the same passages in another order: the prompt carries what it carried),
#: ``unchanged``, or ``unmeasured`` (no identity reference was computed for the call).
ChannelChange = Literal["changed", "reordered", "unchanged", "unmeasured"]


class HookRecord(Record):
    """What one hook did in one call.

    ``digest_in`` is the digest of what the identity hook would have passed on, taken from a deep
    copy made before the hook ran (so an in-place change shows), ``digest_out`` of what this hook
    passed on. ``content_in``/``content_out`` digest the content only: the multiset of passages
    (and scores) for the list hooks, the whitespace-normalised text for the text hooks, so a
    re-ordering that keeps every passage and score is ``order_only``, not a change. For
    ``generate`` the identity is the plain generator on the same prompt with the generator's
    settings as they were before the defense ran. ``released`` lists the retrieved passages whose
    text this hook put into the output verbatim (``generate``/``postprocess``, text its input
    did not carry).
    ``digest_in`` is None where that reference generation was not run (the audit sampled other
    queries, ``pipeline.rag.AuditPolicy``): such a call is unaudited, neither changed nor unchanged.

    ``channel`` is the call's effect on what the hook feeds, compared with the identity hook on the
    same input as the audit by effect compares it (``pipeline.channel_keys``): the selected top-k
    passages by content and order (``score_retrieval``), the rendered prompt (``rewrite_context``),
    the answer text (``generate``, against the reference; ``postprocess``). A hook's own output can
    change while its channel does not (a monotone rescoring, a pool cap above top-k, an id
    rewrite). None: a record written before the channel effect was recorded.
    """

    hook: HookName
    digest_in: str | None
    digest_out: str
    seconds: float = 0.0
    content_in: str | None = None
    content_out: str | None = None
    released: list[str] = Field(default_factory=list)
    channel: ChannelChange | None = None

    @property
    def audited(self) -> bool:
        return self.digest_in is not None

    @property
    def changed(self) -> bool:
        """The content changed (traces without content digests: the exact digests differ); an
        unaudited call (no reference) is neither changed nor unchanged."""
        if not self.audited:
            return False
        if self.content_in is None or self.content_out is None:
            return self.digest_in != self.digest_out
        return self.content_in != self.content_out

    @property
    def order_only(self) -> bool:
        return self.audited and self.digest_in != self.digest_out and not self.changed

    @property
    def releases_context(self) -> bool:
        return bool(self.released)


class RetrievedItem(Record):
    passage_id: str
    doc_id: str
    score: float | None  # None for a passage a defense put into the context itself


class Trace(Record):
    """Everything the built-in pipeline did to answer one query."""

    schema_version: int = SCHEMA_VERSION
    query: str
    turn: int = 0
    defense: str = "none"
    model: str
    candidates: list[RetrievedItem]
    rescored: list[RetrievedItem]
    context: list[RetrievedItem]
    prompt: str
    answer: str
    hooks: list[HookRecord]
    cache_hit: bool
    timings: dict[str, float]

    def hook(self, name: HookName) -> HookRecord:
        for record in self.hooks:
            if record.hook == name:
                return record
        raise KeyError(name)

    @property
    def retrieved_ids(self) -> list[str]:
        return [item.doc_id for item in self.context]


class TargetResponse(Record):
    """What any target returns for one query. ``retrieved_ids`` is None when the target hides them;
    ``refused`` is True only where the target itself says it declined the query (its ``answer`` is
    then whatever it released instead, often a refusal message)."""

    query: str
    answer: str
    retrieved_ids: list[str] | None = None
    trace: Trace | None = None
    refused: bool = False


def digest(value: Any) -> str:
    """A stable SHA-256 over a JSON-able value (pydantic models are dumped first)."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(_plain(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
