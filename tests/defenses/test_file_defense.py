"""``--defense path/to/file.py:Class``: a Defense subclass of the user's, loaded from its file
wherever a defense name is accepted (the pipeline, a grid, the audit), with a clear error for a
missing file, a missing class or a class that is not a Defense; editing the file changes the
grid cells that run it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragleak.defenses import Defense, defense_class, make_defense
from ragleak.errors import ConfigError
from ragleak.grid.spec import grid_from_dict
from ragleak.pipeline.build import build_target
from ragleak.records import Document
from ragleak.testing import tiny_stack

SOURCE = '''
from ragleak.defenses import Defense


class Shout(Defense):
    name = "shout"
    version = "1"
    hooks = frozenset({"postprocess"})

    def postprocess(self, query, answer, passages):
        return answer.upper()


class NotADefense:
    pass
'''


@pytest.fixture
def defense_file(tmp_path) -> Path:
    path = tmp_path / "my_defense.py"
    path.write_text(SOURCE, encoding="utf-8")
    return path


def test_a_file_defense_runs_in_the_pipeline(defense_file):
    defense = make_defense(f"{defense_file}:Shout")
    assert isinstance(defense, Defense) and type(defense).__name__ == "Shout"
    stack = tiny_stack()
    index = stack.index([Document(id="d1", text="The ferry leaves from pier four every ninety minutes.")])
    answer = build_target(stack, index, defense).answer("when does the ferry leave?").answer
    assert answer.startswith("ECHO:") and answer == answer.upper()


@pytest.mark.parametrize("suffix, message", [
    (":NotADefense", "is not a subclass of ragleak.defenses.Defense"),
    (":Missing", "has no class 'Missing'; Defense subclasses there: Shout"),
])
def test_a_bad_class_is_named(defense_file, suffix, message):
    with pytest.raises(ConfigError, match=message):
        defense_class(f"{defense_file}{suffix}")


def test_a_missing_or_broken_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        defense_class(f"{tmp_path}/nowhere.py:Shout")
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_package_anywhere\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="failed to import: ModuleNotFoundError"):
        defense_class(f"{broken}:Shout")


def test_a_grid_pins_the_file_and_reruns_cells_when_it_changes(defense_file, tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("The ferry leaves from pier four.", encoding="utf-8")
    name = f"{defense_file}:Shout"
    raw = {"attacks": ["ps"], "defenses": ["none", name], "corpora": [str(tmp_path / "corpus")], "budget": 2}
    cells = grid_from_dict(raw).expand()
    pinned = cells[1].versions[f"defense:{name}"]
    assert pinned.startswith("1+sha256:")
    defense_file.write_text(SOURCE.replace("answer.upper()", "answer.lower()"), encoding="utf-8")
    edited = grid_from_dict(raw).expand()
    assert edited[0].cell_id == cells[0].cell_id and edited[1].cell_id != cells[1].cell_id
    with pytest.raises(ConfigError, match="is not a subclass"):
        grid_from_dict({**raw, "defenses": [f"{defense_file}:NotADefense"]}).expand()


def test_audit_takes_file_and_class(defense_file):
    from ragleak.cli import app

    result = CliRunner().invoke(app, ["audit", f"{defense_file}:Shout", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["defenses"]
    assert row["class"] == "Shout"
