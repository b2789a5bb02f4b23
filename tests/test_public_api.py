"""The documented imports work in a fresh interpreter, whichever is imported first."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("statement", [
    "from ragleak.defenses import Defense",
    "from ragleak.pipeline import RAGPipeline",
    "from ragleak.pipeline import build_target, Conversation, Target",
    "from ragleak.attacks import Attack",
    "from ragleak.pipeline.target import HttpTarget, CallableTarget, PipelineTarget",
    "from ragleak.measure import run_attack",
    "import ragleak.cli",
])
def test_import_in_a_fresh_process(statement):
    result = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_defense_base_hooks_are_identity():
    from ragleak.defenses import Defense
    from ragleak.records import Passage, Scored

    d = Defense()
    p = [Passage(id="a#0", doc_id="a", text="t")]
    s = [Scored(passage=p[0], score=0.5)]
    assert d.score_retrieval("q", s) == s
    assert d.rewrite_context("q", p) == p
    assert d.postprocess("q", "answer", p) == "answer"
    assert not any(d.overrides(h) for h in ("score_retrieval", "rewrite_context", "generate", "postprocess"))
