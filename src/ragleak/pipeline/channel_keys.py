"""What reaches each channel, as the audit by effect compares it: one definition for the probe
(``audit.probe``) and for the pipeline's per-call hook records (``HookRecord.channel``).

* ``retrieval``: the selected top-k passages and their order, by text (an id rewrite is not a
  change: the same passages reach the prompt);
* ``context``: the rendered prompt, whitespace-normalised;
* ``output``: the answer text, whitespace-normalised.

A change that keeps the same passages in another order (``*_set_key`` equal) is ``reordered``,
not ``changed``: the prompt carries what it carried.
"""

from __future__ import annotations

from typing import Sequence

from ragleak.records import ChannelChange, Passage, Scored, digest


def norm_text(text: str) -> str:
    """Whitespace-normalised: re-spacing carries no content."""
    return " ".join(str(text).split())


def text_key(text: str) -> str:
    """The key of a prompt or an answer."""
    return digest(norm_text(text))


def select_top_k(scored: Sequence[Scored], k: int) -> list[Scored]:
    """The pipeline's selection: the ``k`` highest scores, ties in the order given (a stable sort)."""
    return sorted(scored, key=lambda s: -s.score)[:k]


def retrieval_key(selected: Sequence[Scored]) -> str:
    """The selected passages' texts, in order."""
    return digest([s.passage.text for s in selected])


def retrieval_set_key(selected: Sequence[Scored]) -> str:
    """The selected passages' texts, order-insensitive."""
    return digest(sorted(s.passage.text for s in selected))


def context_set_key(passages: Sequence[Passage]) -> str:
    """The context passages' normalised texts, order-insensitive."""
    return digest(sorted(norm_text(p.text) for p in passages))


def retrieval_change(identity: Sequence[Scored], hooked: Sequence[Scored], permutation: bool = False) -> ChannelChange:
    """The top-k selected from the identity's scores vs from the hook's. ``permutation``: the hook
    handed back its input's candidates with their scores, only in another order; the selection
    can then differ only among tied scores - the pipeline's tie-break, not an effect of the hook -
    so it is a re-order at most (as a re-order of the same passages is)."""
    if retrieval_key(identity) == retrieval_key(hooked):
        return "unchanged"
    return "reordered" if permutation or retrieval_set_key(identity) == retrieval_set_key(hooked) else "changed"


def prompt_change(identity_prompt: str, hooked_prompt: str, identity: Sequence[Passage],
                  hooked: Sequence[Passage]) -> ChannelChange:
    """The prompt rendered from the identity's passages vs from the hook's."""
    if text_key(identity_prompt) == text_key(hooked_prompt):
        return "unchanged"
    return "reordered" if context_set_key(identity) == context_set_key(hooked) else "changed"


def text_change(identity: str | None, hooked: str) -> ChannelChange:
    """The answer from the identity vs from the hook (``identity`` None: no reference, unmeasured)."""
    if identity is None:
        return "unmeasured"
    return "unchanged" if text_key(identity) == text_key(hooked) else "changed"
