"""What a grid's cells need from outside is checked before the run folder exists (exit 2, nothing
written), and ``ragleak grid`` exits non-zero whenever a cell crashed or failed (docs/grid.md):
3 without a gate, 1 with one (an incomplete run fails every gate)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ragleak.errors import ConfigError
from ragleak.grid.preflight import preflight
from ragleak.grid.spec import grid_from_dict

UNSET = "RAGLEAK_TEST_PREFLIGHT_UNSET_TOKEN"


@pytest.fixture
def corpus(tmp_path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "ferry.txt").write_text("The ferry between Dunmore and Clarebay leaves every ninety minutes.")
    return folder


def _grid(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _cli(*args: str):
    from ragleak.cli import app

    return CliRunner().invoke(app, list(args))


def test_an_unset_env_variable_exits_2_with_no_run_folder(tmp_path, corpus, monkeypatch, capsys):
    from ragleak import cli

    monkeypatch.delenv(UNSET, raising=False)
    config = _grid(tmp_path, {"attacks": ["ps"], "defenses": ["external"], "corpora": [str(corpus)], "budget": 3,
                              "target": {"kind": "http", "url": "http://127.0.0.1:9/ask",
                                         "headers": {"Authorization": f"Bearer $env:{UNSET}"}}})
    monkeypatch.setattr("sys.argv", ["ragleak", "grid", "--config", str(config), "--out", str(tmp_path / "run")])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert UNSET in err and "target.headers.Authorization" in err
    assert not (tmp_path / "run").exists()


def test_a_missing_or_unreadable_classifier_is_found_before_the_run(tmp_path, corpus):
    bad = tmp_path / "clf.json"
    bad.write_text('{"not": "a classifier"}')
    for path, message in ((tmp_path / "nope.json", "does not exist"), (bad, "classifier")):
        cells = grid_from_dict({"attacks": ["asymmetry"], "defenses": ["none"], "corpora": [str(corpus)],
                                "attack_params": {"asymmetry": {"classifier_path": str(path)}}}).expand()
        with pytest.raises(ConfigError, match=message) as err:
            preflight(cells)
        assert "attack_params.asymmetry.classifier_path" in str(err.value)


def test_grid_exits_3_when_a_cell_failed_and_1_with_a_gate(tmp_path, corpus, monkeypatch):
    (tmp_path / "dead_rag_service.py").write_text("def answer(query):\n    raise RuntimeError('backend down')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = _grid(tmp_path, {"attacks": ["ps"], "defenses": ["external"], "corpora": [str(corpus)], "budget": 3,
                              "target": {"kind": "callable", "callable": "dead_rag_service:answer"}})
    try:
        result = _cli("grid", "--config", str(config), "--out", str(tmp_path / "run"), "--workers", "1")
        assert result.exit_code == 3, result.output
        assert "1 of 1 cells have no readings" in result.output and "backend down" in result.output
        result = _cli("grid", "--config", str(config), "--out", str(tmp_path / "run"), "--fail-if", "pii_leaks>100")
        assert result.exit_code == 1, result.output
        gates = json.loads((tmp_path / "run" / "summary.json").read_text())["gates"]
        assert gates[0]["failed"] and "evidence incomplete" in gates[0]["message"]
        assert json.loads((tmp_path / "run" / "gates.json").read_text()) == {"gates": ["pii_leaks>100"]}
    finally:
        sys.modules.pop("dead_rag_service", None)
