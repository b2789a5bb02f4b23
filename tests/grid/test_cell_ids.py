"""Content-addressed cells: a cell id covers its corpus's documents and every plugin's version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragleak.grid.spec import GridConfig


def _notes(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a.txt").write_text("The Halvorsen Foundry in Skarvik was founded in 1874 by Ingrid Pettersen.")
    (folder / "b.md").write_text("# Lab\nThe Quillfeather lab keeps spare servo motors in storage room B-17.")
    (folder / "c.jsonl").write_text(json.dumps({"id": "ferry", "text": "The Dunmore ferry leaves at nine."}) + "\n")
    return folder


def _ids(config: GridConfig) -> dict[str, str]:
    return {c.label: c.cell_id for c in config.expand()}


def test_editing_one_document_of_a_file_corpus_changes_every_cell_on_that_corpus(tmp_path):
    notes = _notes(tmp_path / "notes")
    config = GridConfig(attacks=["ps", "pm"], defenses=["none", "pad-regex"], corpora=[str(notes), "synthetic-email"],
                        epsilons=[None, 1.0])
    before = _ids(config)
    (notes / "b.md").write_text("# Lab\nThe Quillfeather lab keeps spare servo motors in storage room B-18.")
    after = _ids(config)
    assert before.keys() == after.keys()
    on_files = [label for label in before if f"/{notes}/" in label]
    assert len(on_files) == 8
    assert all(before[label] != after[label] for label in on_files)
    assert all(before[label] == after[label] for label in before if label not in on_files)
    # a metadata-only edit (a JSONL field besides the text) is a content change too
    (notes / "c.jsonl").write_text(json.dumps({"id": "ferry", "text": "The Dunmore ferry leaves at nine.",
                                               "source_note": "edited"}) + "\n")
    assert all(_ids(config)[label] != after[label] for label in on_files)


def test_a_built_in_corpus_is_digested_too(monkeypatch):
    from ragleak.corpora.synthetic_email import SyntheticEmail

    config = GridConfig(attacks=["ps"], defenses=["none"], corpora=["synthetic-email"])
    cell = config.expand()[0]
    assert cell.corpus_digest is not None and cell.corpus_digest == config.expand()[0].corpus_digest
    original = SyntheticEmail.load

    def changed_generator(self):  # a generator change with the same name, version and parameters
        docs = original(self)
        return [docs[0].model_copy(update={"text": docs[0].text + " P.S."}), *docs[1:]]

    monkeypatch.setattr(SyntheticEmail, "load", changed_generator)
    assert config.expand()[0].cell_id != cell.cell_id


@pytest.mark.parametrize("registry, name", [("attacks", "pm"), ("defenses", "pad-regex"),
                                            ("corpora", "synthetic-email"), ("metrics", "nel_strict")])
def test_a_version_bump_of_any_plugin_in_the_cell_changes_its_id(monkeypatch, registry, name):
    import importlib

    cls = importlib.import_module(f"ragleak.{registry}").__dict__[registry.upper()].get(name)
    config = GridConfig(attacks=["ps", "pm"], defenses=["none", "pad-regex"], corpora=["synthetic-email"])
    before = _ids(config)
    monkeypatch.setattr(cls, "version", cls.version + ".1")
    after = _ids(config)
    changed = {label for label in before if before[label] != after[label]}
    axis = {"attacks": 0, "defenses": 1}.get(registry)  # corpora and metrics: every cell here
    expected = {label for label in before if axis is None or label.split("/")[axis] == name}
    assert changed == expected and changed
    cell = config.expand()[-1]  # pm/pad-regex/synthetic-email
    key = {"attacks": "attack", "defenses": "defense", "corpora": "corpus", "metrics": "metric"}[registry]
    assert cell.versions[f"{key}:{name}"] == cls.version  # the record says which versions produced it


def test_a_cell_whose_corpus_changed_after_planning_is_an_error_not_a_result(tmp_path):
    from ragleak.grid.cell import execute_cell
    from ragleak.grid.store import RunStore

    notes = _notes(tmp_path / "notes")
    config = GridConfig(attacks=["ps"], defenses=["none"], corpora=[str(notes)], budget=1)
    cell = config.expand()[0]
    (notes / "a.txt").write_text("Edited between planning and running.")
    run = tmp_path / "run"
    RunStore(run).init(config, [cell])
    record = execute_cell(cell, str(run))
    assert record.status == "error" and "changed since the grid was planned" in (record.error or "")
    assert not RunStore(run).transcript_path(cell.cell_id).exists()
