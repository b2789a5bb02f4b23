"""ragleak: measure what a RAG pipeline leaks about its private corpus."""

__version__ = "0.1.0"
