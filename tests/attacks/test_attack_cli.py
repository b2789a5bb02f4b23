"""`ragleak attack` as a user runs it: a real subprocess, transcript on disk, errors exit 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from ragleak.attacks import Transcript


def ragleak(*args, timeout=600):
    env = {**os.environ, "RAGLEAK_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "ragleak.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_attack_help_and_user_errors_exit_2_and_write_nothing(tmp_path):
    assert "Usage" in ragleak("attack", "--help").stdout
    out = tmp_path / "t.json"
    for args, message in [
        (["no-such-attack", "--endpoint", "http://127.0.0.1:1/x"], "unknown attacks"),
        (["ps", "--endpoint", "http://127.0.0.1:1/x", "--params", "{not json"], "--params"),
        (["ps", "--endpoint", "http://127.0.0.1:1/x", "--params", '{"turns": 0}'], "turns"),
        (["mi", "--endpoint", "http://127.0.0.1:1/x", "--view", str(tmp_path / "missing.json")], "does not exist"),
        (["ps", "--index", str(tmp_path / "no-index")], "error"),
        (["ps", "--endpoint", "http://127.0.0.1:1/x", "--train"], "trainable attack"),
        (["asymmetry", "--endpoint", "http://127.0.0.1:1/x", "--classifier-out", str(tmp_path / "c.json")],
         "needs --train"),
    ]:
        result = ragleak("attack", *args, "--out", str(out))
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not out.exists()


def test_attack_on_a_dead_endpoint_records_every_failure(tmp_path):
    out = tmp_path / "t.json"
    result = ragleak("attack", "pm", "--endpoint", f"http://127.0.0.1:{_dead_port()}/ask", "--budget", "3",
                     "--seed", "5", "--out", str(out), "--json")
    # nothing was answered: exit 1 (a run that only failed is not a run that found no leakage),
    # with the transcript written and the summary printed
    assert result.returncode == 1, result.stderr
    assert "0 of 3 queries answered" in result.stderr and "Traceback" not in result.stderr
    assert json.loads(result.stdout)["errors"] == 3
    transcript = Transcript.from_json(out.read_text())
    assert transcript.attack == "pm" and transcript.seed == 5 and transcript.errors == 3
    assert all(q.answer is None and "could not reach" in q.error for q in transcript.queries)


@pytest.mark.model
def test_attack_the_built_in_stack_from_the_cli(tmp_path):
    idx, notes = tmp_path / "idx", tmp_path / "notes"
    notes.mkdir()
    for i, text in enumerate(["The Halvorsen Foundry in Skarvik was founded in 1874 by Ingrid Pettersen.",
                              "The Quillfeather lab keeps spare servo motors in storage room B-17.",
                              "The Dunmore ferry leaves every ninety minutes."]):
        (notes / f"{i}.txt").write_text(text)
    assert ragleak("index", "build", str(notes), "--out", str(idx)).returncode == 0
    (tmp_path / "stack.yaml").write_text(f"top_k: 2\ncache_path: {tmp_path / 'cache.sqlite'}\ndecoding:\n  max_tokens: 64\n")
    out = tmp_path / "t.json"
    result = ragleak("attack", "ps", "--index", str(idx), "--budget", "1", "--config", str(tmp_path / "stack.yaml"),
                     "--out", str(out))
    assert result.returncode == 0, result.stderr
    transcript = Transcript.from_json(out.read_text())
    (query,) = transcript.queries
    assert query.ok and query.trace is not None and len(query.trace.context) == 2
    assert query.retrieved_ids == [i.doc_id for i in query.trace.context]
