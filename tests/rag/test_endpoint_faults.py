"""HTTP targets under faults, against real servers on 127.0.0.1: what is retried and what is not,
timeouts, an attack whose every query failed (exit 1, transcript kept), and credentials planted in
the URL, a header and an echoed error body, absent from every file and stream the run writes."""

from __future__ import annotations

import http.server
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ragleak.errors import EndpointError
from ragleak.rag.redact import Redactor, is_secret_name, redact_url
from ragleak.pipeline.target import HttpTarget

URL_PASSWORD = "pw-Vx9Lq2Zr7Tk4"
API_KEY = "key+Qm3/Ws8=Ye5Hb1"  # as sent in a query string: "+" is a space to a server
BEARER = "tok-Jd6Nf0Pa2Uc9"
SECRETS = (URL_PASSWORD, API_KEY, BEARER)


class _Server:
    """A threaded HTTP server whose handler answers POSTs with ``behaviour(handler) -> (status, body)``
    (or sleeps, for a hanging endpoint); it counts the requests it got."""

    def __init__(self, behaviour):
        outer = self
        self.requests = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests += 1
                status, body = behaviour(self)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # a client that gave up (timeout) is expected
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(behaviour):
        servers.append(_Server(behaviour))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _echo(status):
    """An error body that echoes everything the request carried (path with query, headers)."""
    def behaviour(h):
        return status, json.dumps({"error": "denied", "path": h.path, "headers": dict(h.headers.items())}).encode()
    return behaviour


@pytest.mark.parametrize("status", [500, 503, 429])
def test_5xx_and_429_are_retried_with_backoff(serve, status):
    server = serve(lambda h: (status, b"busy"))
    target = HttpTarget(f"{server.base}/ask", retries=2, backoff_s=0.05, timeout_s=5)
    t0 = time.monotonic()
    with pytest.raises(EndpointError, match=rf"after 3 attempts: HTTP {status}"):
        target.answer("q")
    assert server.requests == 3
    assert time.monotonic() - t0 >= 0.05 + 0.1  # backoff 0.05 s, then 0.1 s


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(serve, status):
    server = serve(lambda h: (status, b"no"))
    with pytest.raises(EndpointError, match=f"HTTP {status}"):
        HttpTarget(f"{server.base}/ask", retries=3, backoff_s=5).answer("q")
    assert server.requests == 1


def test_a_flaky_endpoint_recovers_within_its_retries(serve):
    def flaky(h):
        return (503, b"later") if server.requests < 3 else (200, json.dumps({"answer": "fine"}).encode())
    server = serve(flaky)
    assert HttpTarget(f"{server.base}/ask", retries=2, backoff_s=0.01).answer("q").answer == "fine"
    assert server.requests == 3


def test_a_hanging_endpoint_costs_the_timeout_per_attempt(serve):
    def hang(h):
        time.sleep(3)
        return 200, b'{"answer": "late"}'
    server = serve(hang)
    t0 = time.monotonic()
    with pytest.raises(EndpointError, match="after 2 attempts: ReadTimeout"):
        HttpTarget(f"{server.base}/ask", timeout_s=0.3, retries=1, backoff_s=0.01).answer("q")
    assert time.monotonic() - t0 < 2.5
    assert server.requests == 2


def test_defaults_and_bad_settings():
    target = HttpTarget("http://127.0.0.1:1/ask")
    assert (target.timeout_s, target.retries) == (60.0, 2)
    for bad in ({"timeout_s": 0}, {"retries": -1}, {"backoff_s": -1}):
        with pytest.raises(EndpointError):
            HttpTarget("http://127.0.0.1:1/ask", **bad)


def test_redaction_of_urls_headers_and_text():
    url = f"https://alice:{URL_PASSWORD}@api.example.com/v1/ask?api_key={API_KEY}&model=m1&access_token={BEARER}"
    public = redact_url(url)
    assert public == "https://***@api.example.com/v1/ask?api_key=***&model=m1&access_token=***"
    assert all(name and is_secret_name(name) for name in ("Authorization", "X-API-Key", "client_secret", "password"))
    assert not any(is_secret_name(name) for name in ("Content-Type", "model", "query"))
    redact = Redactor.for_endpoint(url, {"Authorization": f"Bearer {BEARER}", "Accept": "application/json"})
    text = (f"echo: {URL_PASSWORD} {API_KEY} key Qm3/Ws8=Ye5Hb1 key%20Qm3%2fWs8%3DYe5Hb1 Bearer {BEARER} "
            f"{BEARER} application/json")
    clean = redact(text)
    assert clean == "echo: *** *** *** *** *** *** application/json", clean


def test_target_name_errors_and_logs_carry_no_secret(serve, caplog):
    server = serve(_echo(500))
    host = server.base.removeprefix("http://")
    url = f"http://alice:{URL_PASSWORD}@{host}/ask?api_key={API_KEY}"
    target = HttpTarget(url, headers={"Authorization": f"Bearer {BEARER}"}, retries=1, backoff_s=0.01)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(EndpointError) as info:
            target.answer("q")
    # the server did get the credentials (so it could echo them) ...
    assert "api_key=" in str(info.value) and server.requests == 2
    # ... but neither the error, nor the target's name or repr, nor any log line has them
    shown = "\n".join([str(info.value), target.name, repr(target), caplog.text])
    assert "HTTP 500" in shown and "***" in shown
    assert not [s for s in SECRETS if s in shown]


def _ragleak(*args, cwd):
    env = {**os.environ, "RAGLEAK_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "ragleak.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def test_an_attack_whose_every_query_failed_exits_1_and_no_output_holds_a_planted_secret(serve, tmp_path):
    server = serve(_echo(500))
    host = server.base.removeprefix("http://")
    endpoint = f"http://alice:{URL_PASSWORD}@{host}/ask?api_key={API_KEY}"
    out = tmp_path / "runs" / "ps.json"
    cache = tmp_path / "cache.sqlite"
    (tmp_path / "stack.yaml").write_text(f"cache_path: {cache}\n")
    result = _ragleak("attack", "ps", "--endpoint", endpoint, "--header", f"Authorization: Bearer {BEARER}",
                      "--retries", "1", "--timeout", "5", "--budget", "3", "--out", str(out),
                      "--config", str(tmp_path / "stack.yaml"), cwd=tmp_path)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "0 of 3 queries answered" in result.stderr and "HTTP 500" in result.stderr
    assert server.requests == 6  # 3 queries, 2 attempts each
    transcript = json.loads(out.read_text())  # still written
    assert transcript["errors"] == 3 and transcript["target"].startswith("http:http://***@127.0.0.1")
    assert all("HTTP 500" in q["error"] and "api_key=***" in q["error"] for q in transcript["queries"])
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert out in written
    for stream in [result.stdout, result.stderr, *(p.read_bytes().decode("utf-8", "replace") for p in written)]:
        assert not [s for s in SECRETS if s in stream]


def test_an_attack_with_answers_exits_0(serve, tmp_path):
    server = serve(lambda h: (200, json.dumps({"answer": "Passage 1: nothing to see."}).encode()))
    out = tmp_path / "ps.json"
    (tmp_path / "stack.yaml").write_text(f"cache_path: {tmp_path / 'cache.sqlite'}\n")
    result = _ragleak("attack", "ps", "--endpoint", f"{server.base}/ask", "--budget", "2", "--out", str(out),
                      "--config", str(tmp_path / "stack.yaml"), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["errors"] == 0 and Path(out).exists()
