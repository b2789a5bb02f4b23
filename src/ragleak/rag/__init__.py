"""The parts of the RAG stack under audit, each usable alone: packaged models, the llama.cpp
generator and its generation cache, multi-sequence decoding, the prompt builder, the embedder and
the FAISS index over its SQLite passage store. The pipeline that drives them through a defense's
hooks sits above the defenses, in ``ragleak.pipeline``.
"""
