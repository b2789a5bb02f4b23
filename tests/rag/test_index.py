from __future__ import annotations

import json

import pytest

from ragleak.errors import IndexStoreError
from ragleak.rag.index import PassageIndex
from ragleak.records import Passage


def _passages(n=6):
    topics = ["ferry timetables", "bread baking", "robot servos", "asthma treatment", "telescope lending", "bell casting"]
    return [Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"A note about {topics[i]}.") for i in range(n)]


def test_search_ranks_the_relevant_passage_first(embedder):
    index = PassageIndex.build(_passages(), embedder)
    hits = index.search("how do I bake bread", 3)
    assert hits[0].passage.doc_id == "d1"
    assert hits[0].score > hits[1].score >= hits[2].score


def test_save_load_round_trip(tmp_path, embedder):
    index = PassageIndex.build(_passages(), embedder, {"source": "unit"})
    index.save(tmp_path / "idx")
    loaded = PassageIndex.load(tmp_path / "idx", embedder)
    assert loaded.passages == index.passages
    assert loaded.metadata == {"source": "unit"}
    assert [h.passage.id for h in loaded.search("telescope", 2)] == [h.passage.id for h in index.search("telescope", 2)]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "staging dirs left behind"


def test_add_and_remove_documents_survive_save(tmp_path, embedder):
    index = PassageIndex.build(_passages(4), embedder)
    assert index.remove_documents(["d1"]) == 1
    index.add([Passage(id="new#0", doc_id="new", text="Spare servo motors are in room B-17.")])
    index.save(tmp_path / "idx")
    loaded = PassageIndex.load(tmp_path / "idx", embedder)
    assert loaded.doc_ids == ["d0", "d2", "d3", "new"]
    assert loaded.search("where are the servo motors", 1)[0].passage.doc_id == "new"
    loaded.add([Passage(id="later#0", doc_id="later", text="x")])  # ids keep counting after a load
    assert len(loaded) == 5


def test_duplicate_passage_id_is_refused(embedder):
    index = PassageIndex.build(_passages(2), embedder)
    with pytest.raises(IndexStoreError, match="already in the index"):
        index.add([_passages(1)[0]])


def test_corrupt_index_dirs_give_clear_errors(tmp_path, embedder):
    PassageIndex.build(_passages(), embedder).save(tmp_path / "idx")
    with pytest.raises(IndexStoreError, match="not a directory"):
        PassageIndex.load(tmp_path / "nope", embedder)
    passages = tmp_path / "idx" / "passages.sqlite"
    passages.write_bytes(passages.read_bytes()[:-20])
    with pytest.raises(IndexStoreError, match="checksum"):
        PassageIndex.load(tmp_path / "idx", embedder)
    (tmp_path / "idx" / "manifest.json").write_text("{not json")
    with pytest.raises(IndexStoreError, match="not valid JSON"):
        PassageIndex.load(tmp_path / "idx", embedder)
    (tmp_path / "idx" / "manifest.json").unlink()
    with pytest.raises(IndexStoreError, match="manifest.json is missing"):
        PassageIndex.load(tmp_path / "idx", embedder)


def test_save_refuses_to_clobber_a_foreign_directory(tmp_path, embedder):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(IndexStoreError, match="refusing to overwrite"):
        PassageIndex.build(_passages(2), embedder).save(foreign)
    assert (foreign / "thesis.tex").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_manifest_counts(tmp_path, embedder):
    PassageIndex.build(_passages(), embedder).save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["passages"] == 6 and manifest["documents"] == 6 and manifest["embedder"] == "all-MiniLM-L6-v2"


def _manifest_names(directory, names: dict):
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["sha256"].update(names)
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("name", ["../outside.txt", "/dev/zero", "sub/index.faiss", "..", ""])
def test_manifest_names_outside_the_folder_are_refused(tmp_path, embedder, name):
    PassageIndex.build(_passages(2), embedder).save(tmp_path / "idx")
    (tmp_path / "outside.txt").write_text("not yours")
    _manifest_names(tmp_path / "idx", {name: "0" * 64})
    with pytest.raises(IndexStoreError, match="not a file inside the index folder") as info:
        PassageIndex.load(tmp_path / "idx", embedder)
    assert "\n" not in str(info.value)


def test_symlinks_leading_out_and_special_files_are_refused(tmp_path, embedder):
    import os

    (tmp_path / "outside.txt").write_text("not yours")
    cases = {"out.txt": lambda p: p.symlink_to(tmp_path / "outside.txt"),
             "zero": lambda p: p.symlink_to("/dev/zero"),
             "fifo": lambda p: os.mkfifo(p),
             "loop": lambda p: p.symlink_to(p)}
    messages = {"out.txt": "links outside", "zero": "links outside", "fifo": "not a regular file", "loop": "cannot open"}
    for name, make in cases.items():
        directory = tmp_path / f"idx-{name}"
        PassageIndex.build(_passages(2), embedder).save(directory)
        make(directory / name)
        _manifest_names(directory, {name: "0" * 64})
        with pytest.raises(IndexStoreError, match=messages[name]):
            PassageIndex.load(directory, embedder)
    # the manifest itself, swapped for a link to a device
    directory = tmp_path / "idx-manifest"
    PassageIndex.build(_passages(2), embedder).save(directory)
    (directory / "manifest.json").unlink()
    (directory / "manifest.json").symlink_to("/dev/zero")
    with pytest.raises(IndexStoreError, match="links outside"):
        PassageIndex.load(directory, embedder)


def test_a_manifest_without_the_checksums_of_its_files_is_refused(tmp_path, embedder):
    PassageIndex.build(_passages(2), embedder).save(tmp_path / "idx")
    path = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["sha256"]["index.faiss"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(IndexStoreError, match="lacks the checksums"):
        PassageIndex.load(tmp_path / "idx", embedder)
