"""`ragleak serve` in deploy mode, as separate processes: ca-dp's budget continues where it stopped
after the server is killed with SIGKILL mid-conversation and restarted, and two servers started
the same way draw different noise.

The served command is the real `ragleak serve` (the CLI's own code: its run context, budget file,
uvicorn, the pipeline and ca-dp's hooks) with one substitution: the target generator is scripted
(``ragleak.testing.ScriptedStack``), because what is under test - ca-dp's Laplace selection and
its charges - is all on the retrieval side, which the scripted generator does not touch; the
observation is each answer's ``retrieved_ids`` (empty once a budget refuses retrieval)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from ragleak.defenses import make_defense
from served import free_port

LAUNCH = ("import sys, ragleak.stack, ragleak.testing; ragleak.stack.Stack = ragleak.testing.ScriptedStack; "
          "from ragleak.cli import app; app(sys.argv[1:], prog_name='ragleak')")


@pytest.fixture(scope="module")
def served_index(fact_index, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("deploy")
    fact_index.save(folder / "idx")
    (folder / "stack.yaml").write_text("top_k: 2\nn_threads: 1\nuse_cache: false\n")
    return folder / "idx"


@contextlib.contextmanager
def server(index: Path, defense: str = "ca-dp") -> Iterator[tuple[subprocess.Popen, str]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "serve", "--index", str(index), "--defense", defense,
                             "--port", str(port), "--config", str(index.with_name("stack.yaml"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"ragleak serve did not start: {proc.stderr.read() if proc.stderr else ''}")
                time.sleep(0.1)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()


def ask(base: str, query: str, client: str, history: list[dict] | None = None) -> dict:
    body = json.dumps({"query": query, "client": client, "history": history or []}).encode()
    request = urllib.request.Request(f"{base}/ask", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def test_a_budget_continues_after_kill_9_and_restart(served_index):
    budget = make_defense("ca-dp").max_turns  # queries with retrieval per client id (4 by default)
    questions = [f"Question {i}: when does the ferry leave?" for i in range(budget + 2)]
    history: list[dict] = []

    def turn(base, i):
        answer = ask(base, questions[i], "alice", history)
        history.append({"query": questions[i], "answer": answer["answer"]})
        return bool(answer["retrieved_ids"])

    with server(served_index) as (proc, base):
        assert [turn(base, i) for i in range(2)] == [True, True]
        proc.send_signal(signal.SIGKILL)  # mid-conversation: no shutdown hook runs
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    assert served_index.with_name("idx.budgets.sqlite").exists()
    with server(served_index) as (_, base):
        after = [turn(base, i) for i in range(2, budget + 2)]
        assert after == [True] * (budget - 2) + [False, False]  # the two charged before the kill still count
        assert ask(base, questions[0], "bob")["retrieved_ids"]  # another client's budget is its own


def test_two_servers_started_the_same_way_draw_different_noise(served_index, tmp_path):
    # each query from a new client id, so no budget refuses; the same ten requests to each server
    runs = []
    for _ in range(2):
        with server(served_index) as (_, base):
            runs.append([tuple(ask(base, "When does the ferry leave?", f"probe-{len(runs)}-{i}")["retrieved_ids"])
                         for i in range(10)])
    assert all(len(ids) == 2 for run in runs for ids in run)
    # a fixed seed would repeat the first server's selections exactly; with fresh noise the chance
    # that ten draws repeat is below 1e-12 (per draw sum p^2 <= max p, and the likeliest ordered
    # pair has p ~ 0.05: measured over 4,000 in-process draws of this query)
    assert runs[0] != runs[1]
