"""Validate, then run: a bad grid or a bad --out stops with one line and exit 2 before any work,
writing nothing; a folder left by an invalid config does not block the fixed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragleak.errors import ConfigError
from ragleak.files import check_output_dir, check_output_file
from ragleak.grid.spec import GridConfig, grid_from_dict
from ragleak.grid.store import CellRecord, RunStore

BASE = {"attacks": ["ps"], "defenses": ["none"], "corpora": ["synthetic-email"]}


def ragleak(*args):
    env = {**os.environ, "RAGLEAK_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "ragleak.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.parametrize("change, message", [
    ({"attacks": ["ps", "nope"]}, "unknown attacks 'nope'"),
    ({"defenses": ["none", "nope"]}, "unknown defenses 'nope'"),
    ({"corpora": ["nope"]}, "unknown corpus 'nope'"),
    ({"attack_params": {"ps": {"pool": "no-such-pool"}}}, "attack 'ps': no query pool 'no-such-pool'"),
    ({"attack_params": {"ps": {"not_a_param": 1}}}, "attack 'ps': invalid parameter 'not_a_param'"),
    ({"defenses": ["dp-retrieval"], "defense_params": {"dp-retrieval": {"epsilon": -1}}}, "defense 'dp-retrieval'"),
    ({"corpus_params": {"synthetic-email": {"n_docs": -3}}}, "corpus 'synthetic-email': invalid parameter 'n_docs'"),
    ({"budgets": {"ps": 0}}, "budgets.ps"),
    ({"budgets": {"ps": -2}}, "budgets.ps"),
    ({"budgets": {"pm": 3}}, "budgets names 'pm', not in the grid's attacks"),
    ({"defense_params": {"pad": {}}}, "defense_params names 'pad'"),
    ({"corpus_params": {"synthetic-corp": {}}}, "corpus_params names 'synthetic-corp'"),
])
def test_every_name_and_parameter_is_checked_before_any_cell_runs(change, message):
    with pytest.raises(ConfigError) as err:
        grid_from_dict({**BASE, **change}).expand()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_same_checks_hold_for_the_cells_a_grid_would_skip_resolving_late():
    # a bad parameter for the second attack is found although the first attack's cells are fine
    config = grid_from_dict({**BASE, "attacks": ["ps", "mi"], "attack_params": {"mi": {"n_members": 0}}})
    with pytest.raises(ConfigError, match="attack 'mi': invalid parameter 'n_members'"):
        config.expand()


def test_a_bad_grid_exits_2_with_one_line_and_no_run_folder(tmp_path):
    for i, body in enumerate(("attacks: [ps, nope]\ndefenses: [none]\ncorpora: [synthetic-email]\n",
                              "attacks: [ps]\ndefenses: [none]\ncorpora: [synthetic-email]\nbudgets: {ps: 0}\n",
                              f"attacks: [ps]\ndefenses: [none]\ncorpora: [{tmp_path / 'missing'}]\n")):
        config, out = tmp_path / f"grid{i}.yaml", tmp_path / f"run{i}"
        config.write_text(body)
        result = ragleak("grid", "--config", str(config), "--out", str(out), "--workers", "1")
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert not out.exists()


def test_attack_out_is_checked_before_the_first_query(tmp_path):
    folder = tmp_path / "a folder"
    folder.mkdir()
    (tmp_path / "file").write_text("x")
    # a closed port: were a query sent, the command would report failed queries, not exit 2 at once
    for out, message in ((folder, "is a folder"), (tmp_path / "file" / "t.json", "is not a folder")):
        result = ragleak("attack", "ps", "--endpoint", "http://127.0.0.1:9/", "--budget", "2", "--out", str(out))
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(folder.iterdir()) == []


def test_output_checks(tmp_path):
    (tmp_path / "file").write_text("x")
    check_output_file(tmp_path / "new" / "deeper" / "t.json")  # created on write, like atomic_write_text
    check_output_file(tmp_path / "file")  # overwritten
    check_output_dir(tmp_path / "run")
    with pytest.raises(ConfigError, match="is a folder"):
        check_output_file(tmp_path)
    with pytest.raises(ConfigError, match="is a file"):
        check_output_dir(tmp_path / "file")
    with pytest.raises(ConfigError, match="is not a folder"):
        check_output_dir(tmp_path / "file" / "run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # checking writes nothing


def _error_record(cell) -> CellRecord:
    return CellRecord(cell_id=cell.cell_id, spec=cell, status="error", error="ConfigError: unknown defenses 'nope'")


def test_a_folder_left_by_an_invalid_config_does_not_block_the_fixed_one(tmp_path):
    from ragleak.grid.spec import CellSpec

    # what an older ragleak left for a grid naming an unknown defense: the grid planned (without
    # validation), each of its cells run to an error record
    bad = GridConfig(**{**BASE, "defenses": ["none", "nope"]})
    bad_cells = [CellSpec(attack="ps", defense=d, corpus="synthetic-email") for d in bad.defenses]
    store = RunStore(tmp_path / "run")
    store.init(bad, bad_cells)
    for cell in bad_cells:
        store.write(_error_record(cell))
    fixed = GridConfig(**{**BASE, "defenses": ["none", "pad-regex"]})
    fixed_cells = fixed.expand()
    store.init(fixed, fixed_cells)  # takes the folder over
    assert list(store.cells_dir.glob("*.json")) == []  # the other grid's error records are gone
    assert store.pending(fixed_cells) == fixed_cells  # ... and every cell of the new plan runs
    assert json.loads((store.root / "plan.json").read_text())["cell_ids"] == [c.cell_id for c in fixed_cells]


def test_a_folder_holding_results_of_another_grid_is_refused(tmp_path):
    from ragleak.errors import RagleakError

    old = GridConfig(**{**BASE, "seeds": [0, 1]})
    store = RunStore(tmp_path / "run")
    cells = old.expand()
    store.init(old, cells)
    store.write(_error_record(cells[0]))
    store.write_transcript(cells[1].cell_id, "{}")  # cell 1 produced a result
    new = GridConfig(**BASE)
    with pytest.raises(RagleakError, match="holds results of a different grid"):
        store.init(new, new.expand())  # seed 0 only: cell 1 is outside the new plan
    assert store.record_path(cells[0].cell_id).exists()  # nothing removed on refusal


def test_a_grid_that_keeps_every_finished_cell_may_grow_on_the_same_folder(tmp_path):
    # ids are content-addressed: a finished cell the new grid also plans is that grid's result too
    small = GridConfig(**BASE)
    store = RunStore(tmp_path / "run")
    (cell,) = small.expand()
    store.init(small, [cell])
    store.write_transcript(cell.cell_id, "{}")
    grown = GridConfig(**{**BASE, "seeds": [0, 1]})
    store.init(grown, grown.expand())
    assert store.transcript_path(cell.cell_id).exists()
    assert len(json.loads((store.root / "plan.json").read_text())["cell_ids"]) == 2
