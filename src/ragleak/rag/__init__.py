"""The RAG stack under audit: embedder, FAISS index, local LLM, pipeline with four hooks, targets.

``from ragleak.rag import RAGPipeline`` is the public entry; it is resolved lazily so that the
defenses (which the pipeline calls) can import the generator protocol without a cycle.
"""

__all__ = ["Conversation", "RAGPipeline", "Response"]


def __getattr__(name: str):
    if name == "Conversation":
        from ragleak.rag.conversation import Conversation

        return Conversation
    if name in __all__:
        from ragleak.rag import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
