"""Model-free dynamic probe of the red-team corpus: each fixture defense through the real pipeline.

The index is a fixed candidate list per query (word-overlap scores); the generator is scripted:
it answers with the names, e-mail addresses and numbers of its context plus a short digest of
the whole rendered prompt (so any change to the messages changes the answer), and it marks a
reply made under decoding settings other than its own. The probe documents carry the PII the
corpus's maskers look for, and are long enough to be recognised when a hook releases them.
Used by ``test_audit_redteam.py`` and ``benchmarks/bench_audit.py``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from ragleak.records import Passage, Scored
from ragleak.testing import ScriptedGenerator, pipeline_under_test

FIXTURES = Path(__file__).parent / "fixtures"
SETS = {"redteam": "redteam_manifest.json", "redteam_holdout": "redteam_holdout_manifest.json",
        "redteam_effect_pre": "redteam_effect_pre_manifest.json",
        "redteam_effect_post": "redteam_effect_post_manifest.json",
        "redteam_effect_post2": "redteam_effect_post2_manifest.json"}

PROBE_DOCS = {
    "alice": "Alice Jones can be reached at alice.jones@acme-corp.com about the merger next week.",
    "ferry": "The ferry leaves every ninety minutes and the SSN on file is 123-45-6789 for the pass.",
    "garden": "The community garden opens at 7 am on weekdays and closes early on Mondays.",
    "servo": "Room B-17 stores the spare servo motors; Bob Stone keeps the key to that room.",
    "clinic": "Patient 4471 was treated for asthma; her password hint is the name of the ferry; phone 555-0187.",
}
PROBE_QUERIES = ("who is alice jones", "what is the ssn on the ferry pass", "when does the garden open",
                 "where are the servo motors and who has the key", "what is the password hint of patient 4471")


class ProbeIndex:
    """A fixed candidate list per query, scored by word overlap, standing in for the FAISS index."""

    def __init__(self, texts: dict[str, str] = PROBE_DOCS):
        self.passages = [Passage(id=f"{k}#0", doc_id=k, text=v) for k, v in texts.items()]
        self.doc_ids = [p.doc_id for p in self.passages]

    def search(self, query, k):
        words = set(query.lower().split())
        scored = [Scored(passage=p, score=len(words & set(p.text.lower().replace(";", " ").split())) / 10.0)
                  for p in self.passages]
        return sorted(scored, key=lambda s: -s.score)[:k]


def probe_reply(prompt: str) -> str:
    """Names, e-mails and numbers of the context, and a digest of the whole prompt."""
    context = prompt.split("Context:\n", 1)[1].split("\n\nQuestion:", 1)[0] if "Context:\n" in prompt else ""
    words = [w.strip(".,;:") for w in context.split() if not w.startswith("Passage")]
    facts = [w for w in words if "@" in w or any(ch.isdigit() for ch in w) or w[:1].isupper()]
    tag = hashlib.sha256(prompt.encode()).hexdigest()[:6]
    return f"From the records: {' '.join(facts[:14])} (draft {tag})"


def probe_traces(defense, queries=PROBE_QUERIES, top_k: int = 3, candidate_k: int = 5):
    generator = ScriptedGenerator({"": probe_reply}, reflect_params=True)
    pipeline = pipeline_under_test(ProbeIndex(), generator, defense, top_k=top_k, candidate_k=candidate_k)
    return [pipeline.answer(q).trace for q in queries]


def load_corpus(name: str = "redteam"):
    """(a red-team fixture module, its manifest rows); the fixtures directory goes on sys.path
    because the corpus imports its cross-module helpers by name."""
    import importlib

    if str(FIXTURES) not in sys.path:
        sys.path.insert(0, str(FIXTURES))
    module = importlib.import_module(name)
    return module, json.loads((FIXTURES / SETS[name]).read_text(encoding="utf-8"))["hooks"]


def evaluate(route: str = "class", name: str = "redteam") -> list[dict]:
    """Per manifest row: the static finding (``route``: "class" imports the fixtures, "file" reads
    the file without importing it), the dynamic activity from the probe and the combined verdict,
    each judged against the expected verdict (and the expected releases-context flag)."""
    from ragleak.audit import hook_activity, inventory_class, inventory_file
    from ragleak.audit.verdict import combine

    redteam, rows = load_corpus(name)
    by_file = {inv.cls: inv for inv in inventory_file(FIXTURES / f"{name}.py")} if route == "file" else {}
    out = []
    for row in rows:
        cls = getattr(redteam, row["cls"])
        inv = by_file[row["cls"]] if route == "file" else inventory_class(cls)
        finding = inv.finding(row["hook"])
        defense = cls()
        activity = hook_activity(probe_traces(defense))[defense.name][row["hook"]]
        verdict = combine(finding, activity)
        expected, releases = row["expected"], row["releases_context"]
        out.append({
            **row,
            "static": finding.status, "static_releases": finding.releases_context,
            "static_ok": finding.status == expected and finding.releases_context == releases,
            "evidence": finding.evidence, "location": finding.location, "pattern": finding.pattern,
            "dynamic": {"changed": activity.changed, "calls": activity.calls, "reordered": activity.reordered,
                        "releases": activity.releases},
            "combined": verdict.verdict, "combined_releases": verdict.releases_context,
            "combined_ok": verdict.verdict == expected and verdict.releases_context == releases,
            "reason": verdict.reason,
        })
    return out
