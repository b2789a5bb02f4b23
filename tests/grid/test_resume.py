"""A grid killed with SIGKILL mid-run resumes to exactly the uninterrupted result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

GRID = """
name: resume-test
attacks: [ps]
defenses: [none]
corpora: [synthetic-corp]
seeds: [0, 1, 2, 3]
budget: 2
corpus_params:
  synthetic-corp: {n_docs: 16}
stack:  # short prompts and answers: this test is about resuming, not about what the model says
  top_k: 2
  chunk_words: 48
  chunk_overlap: 8
  decoding: {max_tokens: 32}
"""


def _grid(config: Path, out: Path, **popen):
    cmd = [sys.executable, "-m", "ragleak.cli", "grid", "--config", str(config), "--out", str(out), "--workers", "1"]
    env = {**os.environ, "RAGLEAK_THREADS": "1"}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen)


def _finished(run: Path) -> int:
    return len(list((run / "cells").glob("*.json"))) if (run / "cells").exists() else 0


def _metrics(run: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text())["metrics"] for p in sorted((run / "cells").glob("*.json"))}


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    config = tmp_path / "grid.yaml"
    config.write_text(GRID)
    straight = tmp_path / "straight"
    proc = _grid(config, straight)
    _, err = proc.communicate(timeout=900)  # communicate closes the pipe (a ResourceWarning otherwise)
    assert proc.returncode == 0, err

    killed = tmp_path / "killed"
    proc = _grid(config, killed)
    deadline = time.monotonic() + 600
    while _finished(killed) == 0:
        assert proc.poll() is None, "the run finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert 1 <= _finished(killed) < 4

    proc = _grid(config, killed)
    _, err = proc.communicate(timeout=900)  # communicate closes the pipe (a ResourceWarning otherwise)
    assert proc.returncode == 0, err
    lines = (killed / "cells.jsonl").read_text().splitlines()
    ids = [json.loads(line)["cell_id"] for line in lines]
    plan = json.loads((killed / "plan.json").read_text())["cell_ids"]
    assert sorted(ids) == sorted(plan) and len(ids) == len(set(ids)) == 4
    assert not [p for p in (killed / "cells").iterdir() if p.suffix != ".json"], "temp files left behind"
    assert _metrics(killed) == _metrics(straight)
