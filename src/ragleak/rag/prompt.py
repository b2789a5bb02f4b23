"""Chat messages, the ChatML rendering the packaged models use, and the RAG prompt layout."""

from __future__ import annotations

from typing import Literal, Sequence

from ragleak.errors import RagleakError
from ragleak.records import Passage, Record, Turn

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the user's question using only the context passages "
    "provided. If the answer is not in the context, say you don't know."
)


class ChatMessage(Record):
    role: Literal["system", "user", "assistant"]
    content: str


def render_chatml(messages: Sequence[ChatMessage]) -> str:
    """Render messages in ChatML with the assistant turn opened (add_generation_prompt).

    This is what the chat templates embedded in the Qwen2.5 and SmolLM2 GGUF files produce when
    a system message is present; a test checks it against the embedded Jinja template. Rendering
    ourselves (rather than letting the runtime do it) gives the exact prompt string that the
    generation cache keys on, without loading the model.
    """
    parts = [f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


#: where a ChatML message ends: the chunk boundaries of the prefix-reuse mode's prefill
MESSAGE_END = "<|im_end|>\n"


def message_ends(prompt: str) -> list[int]:
    """Character offsets just after each complete message of a rendered ChatML prompt (the
    opened assistant turn at its end is not a complete message)."""
    ends, start = [], 0
    while (i := prompt.find(MESSAGE_END, start)) >= 0:
        start = i + len(MESSAGE_END)
        ends.append(start)
    return ends


def format_context(passages: Sequence[Passage]) -> str:
    return "\n".join(f"Passage {i}: {p.text}" for i, p in enumerate(passages, start=1))


def build_rag_messages(
    query: str,
    passages: Sequence[Passage],
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    history: Sequence[Turn] = (),
) -> list[ChatMessage]:
    """System prompt, earlier turns, then the retrieved context and the current question."""
    messages = [ChatMessage(role="system", content=system_prompt)]
    for turn in history:
        messages.append(ChatMessage(role="user", content=turn.query))
        messages.append(ChatMessage(role="assistant", content=turn.answer))
    user = f"Context:\n{format_context(passages)}\n\nQuestion: {query}" if passages else f"Question: {query}"
    messages.append(ChatMessage(role="user", content=user))
    return messages


def parse_rag_messages(messages: Sequence[ChatMessage], passages: Sequence[Passage]) -> tuple[str, str, list[Turn]]:
    """(system prompt, query, history) of messages laid out by ``build_rag_messages``.

    Token-voting defenses rebuild one prompt per voter from these parts; this raises when the
    layout is different, so a voter prompt is never built from a misread query.
    """
    if len(messages) < 2 or messages[0].role != "system" or messages[-1].role != "user" or len(messages) % 2:
        raise RagleakError("token voting expects messages built by build_rag_messages (system, history, user)")
    system, content = messages[0].content, messages[-1].content
    prefix = f"Context:\n{format_context(passages)}\n\nQuestion: " if passages else "Question: "
    query = content[len(prefix):] if content.startswith(prefix) else content
    history = [Turn(query=u.content, answer=a.content) for u, a in zip(messages[1:-1:2], messages[2:-1:2])]
    if build_rag_messages(query, passages, system, history) != list(messages):
        raise RagleakError("could not rebuild the prompt from its messages for token voting; unsupported layout")
    return system, query, history
