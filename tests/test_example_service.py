"""Acceptance: audit the example RAG service (examples/rag_service: BM25, a packaged LLM through
llama-cpp's chat API, OpenAI chat-completions shape, source ids in the response, a bearer token)
end to end, as a user audits their own: plant canaries in a copy of the corpus and load the copy
into the service, build an MI view from two folders (members, non-members), run a grid with an
endpoint target (Ps, canary, MI) against the service as it is and again with its PII masking
on, then ``report`` both runs and ``diff`` them.

Kept short: smollm2-135m, a dozen documents, six queries per run.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ragleak.attacks.base import CorpusView
from ragleak.attacks.canary import export_canary_kb, plant_canaries
from ragleak.corpora import load_corpus
from ragleak.grid.store import RunStore
from served import served

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "tok-Yc3Mw8Fj5Rb0"


def _service_module():
    spec = importlib.util.spec_from_file_location("example_rag_service", ROOT / "examples" / "rag_service" / "service.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _write_folder(folder: Path, docs) -> Path:
    folder.mkdir(parents=True)
    for d in docs:
        (folder / f"{d.id}.txt").write_text(d.text, encoding="utf-8")
    return folder


def _mi_view(members: Path, non_members: Path, out: Path) -> Path:
    """The MI view from two folders: every document of each, labelled, candidates shuffled."""
    inside, outside = load_corpus(members), load_corpus(non_members)
    candidates = inside + outside
    random.Random(0).shuffle(candidates)
    out.write_text(CorpusView(documents=candidates, member_ids=[d.id for d in inside]).model_dump_json(), "utf-8")
    return out


def _grid_yaml(tmp: Path, url: str, corpus: Path, views: dict[str, Path]) -> Path:
    config = {
        "name": "own-service", "attacks": ["ps", "canary", "mi"], "defenses": ["external"],
        "corpora": [str(corpus)], "budgets": {"ps": 2, "canary": 1},
        "attack_params": {"ps": {"pool": "targeted-pii"}, "mi": {"scorers": ["heuristic"]}},
        "target": {"kind": "http", "url": url, "shape": "openai", "api_model": "rag-service",
                   "retrieved_ids_path": "sources", "headers": {"Authorization": "Bearer $env:RAG_TOKEN"},
                   "timeout_s": 300, "retries": 0},
        "views": {k: str(v) for k, v in views.items()},
    }
    path = tmp / f"grid-{len(list(tmp.glob('grid-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.model
def test_audit_the_example_service_end_to_end(tmp_path, monkeypatch):
    from ragleak.cli import app

    service = _service_module()
    documents = load_corpus("synthetic-corp", n_docs=12, seed=0)
    kb_docs, held_out = documents[:9], documents[9:11]
    # 1. a planted copy of the corpus: the service indexes it, the grid scores against it
    kb = plant_canaries(kb_docs, "email", seed=7)
    planted_docs, canary_view = export_canary_kb(kb, tmp_path / "planted")
    # 2. an MI view from two folders: a document the service holds, two it never saw
    members = _write_folder(tmp_path / "members", kb.documents[:1])
    non_members = _write_folder(tmp_path / "non_members", held_out)
    mi_view = _mi_view(members, non_members, tmp_path / "mi_view.json")

    llm = service.load_llm(threads=1)
    docs = service.read_corpus(tmp_path / "planted")
    assert len(docs) == 9
    monkeypatch.setenv("RAG_TOKEN", TOKEN)
    runner = CliRunner()
    runs = {}
    for name, mask in (("plain", False), ("masked", True)):
        with served(service.build_app(docs, llm, top_k=1, max_tokens=32, mask=mask, token=TOKEN)) as base:
            grid = _grid_yaml(tmp_path, f"{base}/v1/chat/completions", planted_docs,
                              {"canary": canary_view, "mi": mi_view})
            out = tmp_path / f"run-{name}"
            result = runner.invoke(app, ["grid", "--config", str(grid), "--out", str(out), "--workers", "1", "--json"])
            assert result.exit_code == 0, result.output
            runs[name] = out
        records = {r.spec.attack: r for r in RunStore(out).records()}
        assert set(records) == {"ps", "canary", "mi"}
        for record in records.values():
            assert record.status == "ok", (record.spec.attack, record.status, record.error)
            assert record.spec.defense == "external" and record.spec.target.url.startswith(base)
        assert records["ps"].counts.answered == 2 and records["mi"].counts.answered == 3
        recovery = records["canary"].metrics["canary_recovery"]
        assert recovery.value is not None and (recovery.n, recovery.n_of) == (len(kb.canaries), "canaries")
        mi_keys = [k for k, m in records["mi"].metrics.items() if m.value is not None]
        assert mi_keys, records["mi"].metrics
        transcripts = [json.loads(p.read_text()) for p in (out / "transcripts").glob("*.json")]
        # the service named its sources, and they are the planted copy's documents
        kb_ids = {d.id for d in kb.documents}
        assert all(set(q["retrieved_ids"]) <= kb_ids for t in transcripts for q in t["queries"])
        if mask:  # the service's masking reached every answer the audit saw
            assert not any("@" in q["answer"] for t in transcripts for q in t["queries"])

    for out in runs.values():
        reported = runner.invoke(app, ["report", str(out), "--json"])
        assert reported.exit_code == 0, reported.output
        assert (out / "report.html").exists()
    diffed = runner.invoke(app, ["diff", str(runs["plain"]), str(runs["masked"]), "--json"])
    assert diffed.exit_code == 0, diffed.output
    rows = json.loads(diffed.output)
    assert {r["defense"] for r in rows} == {"external"} and rows
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
