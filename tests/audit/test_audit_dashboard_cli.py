"""Table I / Table II records and rendering, and the `ragleak audit` command."""

from __future__ import annotations

import json

import pytest
from audit_helpers import FIXTURES, load_fixture, run_pipeline
from rich.console import Console
from typer.testing import CliRunner

from ragleak.audit import AuditError, inventory_class
from ragleak.audit.dashboard import MetricReading, readings_from_runs, table_one, table_two
from ragleak.cli import app
from ragleak.cli.tables import render_table_one, render_table_two
from ragleak.defenses.base import Defense


@pytest.fixture(scope="module")
def invs():
    t, s = load_fixture("hook_table"), load_fixture("dp_stubs")
    named = {
        "none": Defense,
        "mask": type("Mask", (t.RegexMask,), {"name": "mask", "hooks": frozenset({"postprocess"})}),
        "noisy": type("Noisy", (t.NoisyScores,), {"name": "noisy"}),
        "refuse": type("Refuse", (t.AlwaysRefuses,), {"name": "refuse", "hooks": frozenset({"postprocess"})}),
        "stub-dp-retrieval": s.StubbedDPRetrieval,
    }
    return {k: inventory_class(v) for k, v in named.items()}


def _text(renderable) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def test_table_one_status_per_defense(invs):
    rows = {r["defense"]: r for r in table_one(invs.values())}
    assert rows["none"]["status"] == "baseline"
    assert rows["mask"]["status"] == "pattern-limited"
    assert rows["noisy"]["status"] == "retrieval-only"
    assert rows["refuse"]["status"] == "end-to-end"
    assert rows["stub-dp-retrieval"]["problems"]
    assert rows["mask"]["hooks"]["postprocess"]["declared"] is True
    text = _text(render_table_one(list(rows.values())))
    assert "pattern" in text and "inactive*" in text and "retrieval-only" in text
    json.dumps(list(rows.values()))  # JSON-able


def test_table_one_warns_when_an_active_hook_never_fires(invs):
    activity = {"mask": {h: a for h, a in _activity("mask", changed=0).items()}}
    rows = {r["defense"]: r for r in table_one([invs["mask"], invs["noisy"]], activity)}
    assert any("changed 0 of 4" in p for p in rows["mask"]["problems"])
    assert rows["mask"]["status"] == "inactive"
    assert rows["mask"]["hooks"]["postprocess"]["static_active"] and not rows["mask"]["hooks"]["postprocess"]["active"]
    assert "no traces of this defense in the run" in rows["noisy"]["problems"]


def _activity(defense, changed):
    from ragleak.audit.trace import HookActivity
    from ragleak.records import HOOK_NAMES

    return {h: HookActivity(defense=defense, hook=h, changed=changed if h == "postprocess" else 0, calls=4)
            for h in HOOK_NAMES}


def test_table_two_marks_interpretable_cells(invs):
    readings = [
        MetricReading(defense="noisy", metric="mi_auc", delta=-11.2, low=-14.0, high=-8.1),
        MetricReading(defense="mask", metric="mi_auc", delta=-40.5, low=-45.0, high=-36.0),
        MetricReading(defense="mask", metric="nel_strict", delta=-2.0, low=-2.5, high=-1.4),
        MetricReading(defense="none", metric="nel_strict", delta=0.0),
    ]
    cells = {(c["defense"], c["metric"]): c for c in table_two(readings, invs.values())}
    assert cells["noisy", "mi_auc"]["interpretable"]
    assert not cells["mask", "mi_auc"]["interpretable"]  # a postprocess mask does not reach retrieval
    assert cells["mask", "nel_strict"]["interpretable"]
    assert not cells["none", "nel_strict"]["interpretable"]
    assert cells["mask", "mi_auc"]["channels"] == ["retrieval"]
    text = _text(render_table_two(list(cells.values())))
    assert "n.i." in text and "-11.2" in text
    with pytest.raises(AuditError):
        table_two([MetricReading(defense="ghost", metric="mi_auc", delta=0.0)], invs.values())


def test_readings_from_runs_uses_the_paired_bootstrap():
    runs = {"none": {"nel_strict": [4.0, 5.0, 3.0, 4.0, 6.0]},
            "mask": {"nel_strict": [1.0, 2.0, 0.0, 1.0, 3.0]}}
    (reading,) = readings_from_runs(runs, "none")
    assert reading.delta == pytest.approx(-3.0)
    assert reading.low == reading.high == pytest.approx(-3.0)  # every paired delta is -3
    (unpaired,) = readings_from_runs(runs, "none", paired=False)
    assert unpaired.low < -3.0 < unpaired.high
    with pytest.raises(AuditError):
        readings_from_runs(runs, "baseline-missing")


runner = CliRunner()


def test_cli_audits_a_file_as_json_and_strict_exits_2():
    path = str(FIXTURES / "dp_stubs.py")
    result = runner.invoke(app, ["audit", path, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {r["defense"] for r in data["defenses"]} == {"stub-dp-retrieval", "stub-ca-dp", "stub-private-rag"}
    strict = runner.invoke(app, ["audit", path, "--strict"])
    assert strict.exit_code != 0 and isinstance(strict.exception, AuditError)


def test_cli_main_exits_2_on_strict_failure(monkeypatch, capsys):
    from ragleak import cli

    monkeypatch.setattr("sys.argv", ["ragleak", "audit", str(FIXTURES / "dp_stubs.py"), "--strict"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 2
    assert "strict audit failed" in capsys.readouterr().err


def test_cli_with_run_dir_and_readings(tmp_path):
    stub = load_fixture("dp_stubs").StubbedDPRetrieval
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    traces = run_pipeline(stub())
    (run_dir / "traces.json").write_text(json.dumps([t.model_dump(mode="json") for t in traces]))
    readings = tmp_path / "readings.json"
    readings.write_text(json.dumps([{"defense": "stub-dp-retrieval", "metric": "nel_strict", "delta": -0.1,
                                     "low": -0.5, "high": 0.3}]))
    result = runner.invoke(app, ["audit", str(FIXTURES / "dp_stubs.py"), "--run", str(run_dir),
                                 "--readings", str(readings), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    row = next(r for r in data["defenses"] if r["defense"] == "stub-dp-retrieval")
    assert row["hooks"]["generate"]["dynamic"] == {"changed": 0, "calls": 4, "basis": "channel", "output_changed": 0,
                                                  "reordered": 0, "releases": 0}
    assert row["hooks"]["score_retrieval"]["dynamic"] == {"changed": 4, "calls": 4, "basis": "channel", "output_changed": 4,
                                                         "reordered": 0, "releases": 0}
    assert row["hooks"]["generate"]["verdict"] == "inactive"
    (cell,) = data["table_two"]
    assert cell["interpretable"] and "score_retrieval" in cell["reason"]
    human = runner.invoke(app, ["audit", str(FIXTURES / "dp_stubs.py"), "--run", str(run_dir)])
    assert human.exit_code == 0 and "Table I" in human.stdout and "0/4" in human.stdout


def test_cli_user_errors_are_ragleak_errors(tmp_path):
    result = runner.invoke(app, ["audit", "no-such-defense"])
    assert isinstance(result.exception, AuditError)
    bad = tmp_path / "r.json"
    bad.write_text("[1]")
    result = runner.invoke(app, ["audit", "none", "--readings", str(bad)])
    assert isinstance(result.exception, AuditError)
