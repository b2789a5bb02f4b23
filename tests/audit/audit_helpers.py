"""Audit test helpers: fixture modules loaded by path, a tiny in-memory index, a scripted generator."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ragleak.records import Passage, Scored
from ragleak.testing import echo, pipeline_under_test

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str):
    """Import tests/audit/fixtures/<name>.py as module ``audit_fixture_<name>`` (registered in sys.modules)."""
    module_name = f"audit_fixture_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


class TinyIndex:
    """A fixed candidate list per query (word-overlap scores), standing in for the FAISS index."""

    def __init__(self, texts: dict[str, str]):
        self.passages = [Passage(id=f"{k}#0", doc_id=k, text=v) for k, v in texts.items()]

    def search(self, query, k):
        words = set(query.lower().split())
        scored = [Scored(passage=p, score=len(words & set(p.text.lower().split())) / 10.0) for p in self.passages]
        return sorted(scored, key=lambda s: -s.score)[:k]


DOCS = {
    "a": "Alice Jones can be reached at alice.jones@acme-corp.com about the merger.",
    "b": "The ferry leaves every ninety minutes; the SSN on file is 123-45-6789.",
    "c": "The garden opens at 7 am on weekdays.",
    "d": "Room B-17 stores the spare servo motors.",
}


def run_pipeline(defense, queries=("who is alice", "ferry ssn", "garden hours", "servo room")):
    """Traces of ``queries`` through the real pipeline with the scripted generator and the tiny index."""
    pipeline = pipeline_under_test(TinyIndex(DOCS), echo, defense, top_k=2, candidate_k=4)
    return [pipeline.answer(q).trace for q in queries]
