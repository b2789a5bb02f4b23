"""A grid whose target is an endpoint of the user's: an HTTP service (OpenAI shape, bearer token
from the environment) and a Python callable, run end to end through ``run_grid``, ``report`` and
``diff``; the token is in no file the run writes; a dead service fails its cell with the reason;
and a config that cannot be run against an endpoint is refused before anything is written.

The service is ``ragleak serve``'s app over a callable that leaks its documents verbatim (no
model); the metrics read the grid's copy of the service's corpus.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragleak.errors import ConfigError
from ragleak.grid.runner import run_grid
from ragleak.grid.spec import GridConfig, grid_from_dict
from ragleak.grid.store import RunStore
from ragleak.pipeline.target import CallableTarget
from ragleak.serve import make_app
from served import bearer_only, free_port, served

TOKEN = "tok-Gq7Vb2Nx5Pe9"
DOCS = {
    "payroll.txt": "Payroll contact: Ingrid Halvorsen, ingrid.halvorsen@fjordline-payroll.example, phone 555-0143. "
                   "The VPN password for the payroll share is Tr0ub4dor-77.",
    "clinic.txt": "Patient Maria Gonzales was treated at Riverside Clinic for asthma in May 2023; "
                  "write to maria.gonzales@riverside-health.example for the record.",
    "ferry.txt": "The ferry between Dunmore and Clarebay leaves every ninety minutes from pier 4.",
}


class LeakyService:
    """Answers every query with one document verbatim (in turn) and names it as the source; refuses
    requests without the bearer token, as a real service would."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, query: str) -> dict:
        name = sorted(DOCS)[self.calls % len(DOCS)]
        self.calls += 1
        return {"answer": f"From our records: {DOCS[name]}", "retrieved_ids": [f"{name}#0"]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def service():
    app = bearer_only(make_app(CallableTarget(LeakyService(), exposes_retrieved_ids=True)), TOKEN)
    with served(app) as base:
        yield base


def _grid(corpus: Path, target: dict, **extra) -> GridConfig:
    return grid_from_dict({"name": "endpoint", "attacks": ["ps"], "defenses": ["external"], "corpora": [str(corpus)],
                           "budget": 3, "target": target, **extra})


def _http(base: str, **extra) -> dict:
    return {"kind": "http", "url": f"{base}/v1/chat/completions", "shape": "openai", "api_model": "their-rag",
            "retrieved_ids_path": "retrieved_ids", "headers": {"Authorization": "Bearer $env:RAG_TOKEN"},
            "retries": 0, **extra}


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_grid_runs_against_an_http_endpoint_and_reports(tmp_path, corpus, service, monkeypatch):
    from ragleak.cli import app

    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    grid = _grid(corpus, _http(service))
    cells = grid.expand()
    assert [c.label for c in cells] == [f"ps/external/{corpus}/single/eps=-/seed=0@{service}/v1/chat/completions"]
    state = run_grid(grid, tmp_path / "run", workers=1, cells=cells)
    assert (state.errors, state.failed) == (0, 0)
    (record,) = RunStore(tmp_path / "run").records()
    assert record.status == "ok" and record.counts.answered == 3
    assert "external" in record.guarantee["notes"] or "not visible" in record.guarantee["notes"]
    transcript = json.loads((tmp_path / "run" / "transcripts" / f"{record.cell_id}.json").read_text())
    assert transcript["target"] == f"http:{service}/v1/chat/completions"
    assert all("From our records" in q["answer"] for q in transcript["queries"])
    # the metrics read the grid's copy of the corpus: verbatim leaks of its passages are found
    assert any(m.value for m in record.metrics.values() if m.value is not None)

    runner = CliRunner()
    assert runner.invoke(app, ["report", str(tmp_path / "run"), "--json"]).exit_code == 0
    # the same service, unchanged, audited twice: diff sees the same levels
    assert run_grid(grid, tmp_path / "run2", workers=1).errors == 0
    diffed = runner.invoke(app, ["diff", str(tmp_path / "run"), str(tmp_path / "run2"), "--json"])
    assert diffed.exit_code == 0, diffed.output
    rows = json.loads(diffed.output)
    assert rows and all(r["defense"] == "external" and r["moved"] in (False, None) for r in rows)
    # the token was sent (the service answered), and written nowhere
    for path in _files_under(tmp_path):
        assert TOKEN.encode() not in path.read_bytes(), path


def test_cell_ids_name_the_endpoint_not_its_timeout(corpus, service, monkeypatch):
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    (base,) = _grid(corpus, _http(service)).expand()
    (slower,) = _grid(corpus, _http(service, timeout_s=120, retries=3)).expand()
    (other,) = _grid(corpus, _http(service.replace("127.0.0.1", "localhost"))).expand()
    assert base.cell_id == slower.cell_id != other.cell_id
    stack_grid = grid_from_dict({"attacks": ["ps"], "defenses": ["none"], "corpora": [str(corpus)], "budget": 3})
    (builtin,) = stack_grid.expand()
    assert "target" not in builtin.model_dump(exclude_none=True) and builtin.cell_id != base.cell_id


def test_a_dead_endpoint_fails_its_cell_with_the_reason(tmp_path, corpus):
    dead = f"http://127.0.0.1:{free_port()}/ask"
    grid = _grid(corpus, {"kind": "http", "url": dead, "retries": 0, "timeout_s": 2, "stop_after_failures": 2},
                 budget=10)
    run_grid(grid, tmp_path / "run", workers=1)
    (record,) = RunStore(tmp_path / "run").records()
    assert record.status == "failed" and record.counts.queries == 2
    assert record.error.startswith("stopped after 2 of 10 queries: the last 2 queries failed")
    assert "ConnectError" in record.error


def test_grid_runs_against_a_callable(tmp_path, corpus, monkeypatch):
    module = tmp_path / "my_rag_service.py"
    module.write_text("def answer(query):\n    return {'answer': 'Ferry: ' + query, 'retrieved_ids': ['ferry.txt#0']}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    grid = _grid(corpus, {"kind": "callable", "callable": "my_rag_service:answer", "exposes_retrieved_ids": True},
                 defenses=["none"])
    run_grid(grid, tmp_path / "run", workers=1)
    (record,) = RunStore(tmp_path / "run").records()
    assert record.status == "ok" and record.spec.target.callable == "my_rag_service:answer"
    sys.modules.pop("my_rag_service", None)


@pytest.mark.parametrize("change, message", [
    ({"defenses": ["pad-regex"]}, "runs its own defense"),
    ({"attacks": ["mi"]}, "needs views.mi"),
    ({"attacks": ["mi"], "views": {"mi": "CORPUS/ferry.txt"}}, "not a corpus view"),
    ({"modes": ["multi"], "target": {"kind": "http", "url": "http://127.0.0.1:9/ask",
                                     "request_template": '{"q": "{query}"}'}}, "carries the history"),
    ({"target": {"kind": "http", "url": "http://127.0.0.1:9/ask", "headers": {"Authorization": "Bearer x1234"}}},
     "holds a credential literally"),
    ({"target": {"kind": "callable", "callable": "no_such_module_here:fn"}}, "cannot load target callable"),
])
def test_configs_that_cannot_run_against_an_endpoint_are_refused(tmp_path, corpus, change, message):
    raw = {"attacks": ["ps"], "defenses": ["external"], "corpora": [str(corpus)], "budget": 3,
           "target": {"kind": "http", "url": "http://127.0.0.1:9/ask"}, **change}
    raw["views"] = {k: v.replace("CORPUS", str(corpus)) for k, v in raw.get("views", {}).items()}
    with pytest.raises(ConfigError, match=message):
        grid_from_dict(raw).expand()
    assert not (tmp_path / "run").exists()


def test_external_and_views_belong_to_endpoints(corpus):
    with pytest.raises(ConfigError, match="endpoint's own defense"):
        grid_from_dict({"attacks": ["ps"], "defenses": ["external"], "corpora": [str(corpus)]})
    with pytest.raises(ConfigError, match="views apply to endpoint targets"):
        grid_from_dict({"attacks": ["mi"], "defenses": ["none"], "corpora": [str(corpus)], "views": {"mi": "v.json"}})
