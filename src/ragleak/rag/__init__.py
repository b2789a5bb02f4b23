"""The RAG stack's parts and its pipeline.

The parts (``models``, ``generator``, ``cache``, ``multiseq``, ``prompt``, ``embedder``, ``index``,
``speed``) sit below the defenses, which call the generator and the prompt builder. The pipeline
(``pipeline``: retrieval, top-k, prompt, generation and post-processing through the four defense
hooks), the targets an attack queries (``target``) and ``indexing`` sit above the defenses; import
them by their module, e.g. ``from ragleak.rag.pipeline import RAGPipeline``.
"""
