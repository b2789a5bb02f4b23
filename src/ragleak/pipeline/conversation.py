"""The one multi-turn wrapper: a conversation keeps the history of turns and sends it with each question.

It works over anything that answers ``answer(query, history, **kwargs)`` with an object carrying
``.answer``: a ``RAGPipeline`` (retrieval uses the current question only; the history travels
in the chat messages, as in a chat front-end over a RAG backend), any ``Target``, or an attack's
recording ``QuerySession`` door. A call that yields nothing (``None``: the budget is spent) or no
answer (a failed call, recorded by the session) leaves the history unchanged.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, Sequence, TypeVar

from ragleak.records import Turn

R = TypeVar("R", covariant=True)


class Responder(Protocol[R]):
    def answer(self, query: str, history: Sequence[Turn], /, **kwargs: Any) -> R: ...


class Conversation(Generic[R]):
    """Multi-turn mode over ``responder``; ``asked`` counts the turns sent, failed ones included."""

    def __init__(self, responder: Responder[R], number: int = 0) -> None:
        self.responder = responder
        self.number = number
        self.history: list[Turn] = []
        self.asked = 0

    def ask(self, query: str, **kwargs: Any) -> R:
        response = self.responder.answer(query, tuple(self.history), **kwargs)
        if response is None:
            return response
        self.asked += 1
        answer = getattr(response, "answer", None)
        if answer is not None:
            self.history.append(Turn(query=query, answer=answer))
        return response
