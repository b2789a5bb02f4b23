"""Canaries planted in a copy of the user's folder (txt, md, jsonl, csv), the manifest, and the
canary attack reading it in a grid cell."""

from __future__ import annotations

import csv
import json

import pytest

from ragleak.attacks.canary import CanaryExtraction
from ragleak.attacks.plant import manifest_path, plant_folder
from ragleak.attacks.views import mi_view, read_view
from ragleak.corpora import load_corpus
from ragleak.errors import ConfigError


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("The Halvorsen Foundry was founded in 1874. It still casts bells.")
    (root / "sub" / "b.md").write_text("# Lab\nThe Quillfeather lab keeps spare servo motors.")
    (root / "c.jsonl").write_text("".join(json.dumps({"id": f"j{i}", "text": f"Ferry note {i}. It leaves at {i} pm.",
                                                      "lang": "en"}) + "\n" for i in range(3)))
    with open(root / "d.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text", "owner"])
        for i in range(3):
            writer.writerow([f"c{i}", f"Ticket {i} was closed. Nobody replied.", "ops"])
    return root


def test_every_document_may_carry_a_canary_and_the_rest_is_unchanged(folder, tmp_path):
    out = tmp_path / "planted"
    manifest = plant_folder(folder, out, n=8, seed=5)  # all 8 documents: txt, md, jsonl lines, csv rows
    assert sorted(c.kind for c in manifest.canaries) == ["email"] * 4 + ["name"] * 4
    assert json.loads(manifest_path(out).read_text())["canaries"][0]["secret"] == manifest.canaries[0].secret
    before = {d.id: d for d in load_corpus(folder)}
    after = {d.id: d for d in load_corpus(out)}
    assert set(before) == set(after)
    for c in manifest.canaries:
        doc = after[c.doc_id]
        assert doc.text.count(c.secret) == 1 and doc.text.replace(" " + c.sentence, "") == before[c.doc_id].text
        assert doc.metadata == before[c.doc_id].metadata  # the jsonl/csv fields other than the text survive
    assert read_view(manifest_path(out)).secrets == manifest.secrets


def test_planted_files_get_the_mode_the_umask_gives(folder, tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        out = tmp_path / "planted"
        manifest = plant_folder(folder, out, n=8, seed=5)
    finally:
        os.umask(old)
    changed = {out / c.file for c in manifest.canaries} | {manifest_path(out)}
    # a service running as another user reads the planted documents like the rest (never 0600)
    assert {stat.S_IMODE(p.stat().st_mode) for p in changed} == {0o644}


def test_plant_refuses_what_would_break_the_audit(folder, tmp_path):
    with pytest.raises(ConfigError, match="inside"):
        plant_folder(folder, folder / "copy", n=1)
    with pytest.raises(ConfigError, match="need as many documents"):
        plant_folder(folder, tmp_path / "x", n=9)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        plant_folder(folder, tmp_path / "full", n=1)


def test_the_canary_attack_scores_a_planted_copy_from_its_manifest(folder, tmp_path):
    out = tmp_path / "planted"
    manifest = plant_folder(folder, out, n=3, seed=1)
    attack = CanaryExtraction(manifest=str(manifest_path(out)))
    documents = load_corpus(out)
    kept, view = attack.prepare_corpus(documents, seed=0)
    assert kept == documents and view.secrets == manifest.secrets  # nothing planted twice
    with pytest.raises(ConfigError, match="planted copy"):
        attack.prepare_corpus(load_corpus(folder), seed=0)


def test_mi_view_labels_members(folder, tmp_path):
    others = tmp_path / "others"
    others.mkdir()
    (others / "z.txt").write_text("An unrelated note about the harbour.")
    view = mi_view(folder, others)
    assert len(view.documents) == 9 and "z.txt" not in view.member_ids and "a.txt" in view.member_ids
    assert read_view_roundtrip(view, tmp_path).member_ids == view.member_ids


def read_view_roundtrip(view, tmp_path):
    path = tmp_path / "view.json"
    path.write_text(view.model_dump_json())
    return read_view(path)
