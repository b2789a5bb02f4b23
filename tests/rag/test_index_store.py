"""A grid run builds each corpus's index once: the first worker saves it in the run folder and
every other worker (a fresh process) loads it instead of embedding the corpus again."""

from __future__ import annotations

import logging
import shutil

import pytest

from ragleak import stack as stack_module
from ragleak.rag.index import PassageIndex
from ragleak.records import Document
from ragleak.testing import tiny_stack

DOCS = [Document(id=f"d{i}", text=f"Record {i}: the ferry to island {i} leaves at {i} o'clock from pier {i % 3}.")
        for i in range(30)]


def test_a_stored_index_is_loaded_by_a_fresh_process_and_answers_alike(tmp_path, monkeypatch):
    store = tmp_path / "indexes"
    monkeypatch.setattr(stack_module, "_LOADED", {})
    built = tiny_stack().index(DOCS, store=store)
    (saved,) = list(store.iterdir())
    monkeypatch.setattr(stack_module, "_LOADED", {})  # another worker: nothing in memory
    calls = []
    monkeypatch.setattr(PassageIndex, "build", classmethod(lambda cls, *a, **k: calls.append(1)))
    loaded = tiny_stack().index(DOCS, store=store)
    assert calls == [] and loaded is not built
    queries = ["when does the ferry to island 7 leave?", "pier 2"]
    for q in queries:
        assert [(h.passage, h.score) for h in loaded.search(q, 5)] == [(h.passage, h.score) for h in built.search(q, 5)]
    assert loaded.metadata == built.metadata and list(store.iterdir()) == [saved]


def test_a_corrupt_stored_index_is_rebuilt_with_a_warning(tmp_path, monkeypatch, caplog):
    store = tmp_path / "indexes"
    monkeypatch.setattr(stack_module, "_LOADED", {})
    built = tiny_stack().index(DOCS, store=store)
    (saved,) = list(store.iterdir())
    data = bytearray((saved / "passages.sqlite").read_bytes())
    data[-10] ^= 0x01
    (saved / "passages.sqlite").write_bytes(bytes(data))
    monkeypatch.setattr(stack_module, "_LOADED", {})
    with caplog.at_level(logging.WARNING):
        rebuilt = tiny_stack().index(DOCS, store=store)
    assert "unusable" in caplog.text
    assert [h.passage.id for h in rebuilt.search("pier 1", 3)] == [h.passage.id for h in built.search("pier 1", 3)]
    monkeypatch.setattr(stack_module, "_LOADED", {})
    assert tiny_stack().index(DOCS, store=store).search("pier 1", 1)[0].score == built.search("pier 1", 1)[0].score


def test_every_cell_of_a_worker_shares_one_loaded_model_for_all_roles(monkeypatch):
    # the attacker model of RAG-Thief, IKEA and DEAL is the process's one loaded generator, not a
    # fresh load per cell (constructing the generator loads nothing: weights load on first use)
    from ragleak.config import StackConfig
    from ragleak.stack import Stack

    monkeypatch.setattr(stack_module, "_LOADED", {})
    config = StackConfig(n_threads=1, use_cache=False)
    first, second = Stack(config), Stack(config)  # two cells of one worker
    inner = {role: s.generator(role).inner for s in (first, second) for role in ("target", "attacker")}
    assert len({id(g) for g in inner.values()}) == 1
    assert first.generator("attacker") is not second.generator("attacker")  # per-cell counters
    other = Stack(config.model_copy(update={"model": "smollm2-135m"})).generator("attacker").inner
    assert other is not inner["attacker"]


def test_passages_shared_by_two_indexes_are_embedded_once(monkeypatch):
    # MI indexes the first kb_size documents of a corpus other cells index whole
    monkeypatch.setattr(stack_module, "_LOADED", {})
    stack = tiny_stack()
    embedder = stack.embedder()
    seen: list[str] = []
    encode = embedder.encode
    monkeypatch.setattr(embedder, "encode", lambda texts: seen.extend(texts) or encode(texts))
    whole = stack.index(DOCS)
    assert len(seen) == len(whole)
    subset = stack.index(DOCS[:10], metadata={"kb": "first 10"})
    assert len(seen) == len(whole)  # nothing embedded again
    fresh = PassageIndex.build(subset.passages, embedder)  # the embedder itself, from scratch
    for q in ("island 3", "pier 0 at 9 o'clock"):
        assert [(h.passage.id, h.score) for h in subset.search(q, 4)] == [(h.passage.id, h.score)
                                                                          for h in fresh.search(q, 4)]


def test_a_killed_index_build_resumes_at_its_first_missing_slice(tmp_path, monkeypatch):
    from ragleak.rag import index as index_module

    monkeypatch.setattr(index_module, "EMBED_SLICE", 8)  # 30 passages: 4 slices
    monkeypatch.setattr(stack_module, "_LOADED", {})
    stack = tiny_stack()
    embedder = stack.embedder()
    passages = stack.index(DOCS).passages  # the reference build (no store)
    work = tmp_path / "slices"
    encode, calls = embedder.encode, []

    def dies_after_two_slices(texts):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the worker is killed mid-build
        calls.append(list(texts))
        return encode(texts)

    with pytest.raises(KeyboardInterrupt):
        PassageIndex.build(passages, embedder, encode=dies_after_two_slices, work_dir=work)
    assert len(list(work.glob("*.npy"))) == 2
    calls.clear()
    resumed = PassageIndex.build(passages, embedder, encode=lambda t: calls.append(list(t)) or encode(t), work_dir=work)
    assert sum(map(len, calls)) == len(passages) - 16  # only the two missing slices were embedded
    fresh = PassageIndex.build(passages, embedder)
    for q in ("island 5", "pier 1"):
        assert [(h.passage.id, h.score) for h in resumed.search(q, 6)] == [(h.passage.id, h.score)
                                                                           for h in fresh.search(q, 6)]
    # slices of another build are never mixed in: the folder is stamped with what it holds
    calls.clear()
    PassageIndex.build(passages[:-1], embedder, encode=lambda t: calls.append(list(t)) or encode(t), work_dir=work)
    assert sum(map(len, calls)) == len(passages) - 1


def test_a_slice_folder_another_worker_removes_midway_costs_only_the_resume(tmp_path, monkeypatch, caplog):
    from ragleak.rag import index as index_module

    monkeypatch.setattr(index_module, "EMBED_SLICE", 8)
    monkeypatch.setattr(stack_module, "_LOADED", {})
    stack = tiny_stack()
    embedder = stack.embedder()
    passages = stack.index(DOCS).passages
    work = tmp_path / "slices"
    encode = embedder.encode

    def twin_finishes_and_cleans_up(texts):
        shutil.rmtree(work, ignore_errors=True)
        return encode(texts)

    index = PassageIndex.build(passages, embedder, encode=twin_finishes_and_cleans_up, work_dir=work)
    fresh = PassageIndex.build(passages, embedder)
    assert [(h.passage.id, h.score) for h in index.search("pier 2", 5)] == [(h.passage.id, h.score)
                                                                            for h in fresh.search("pier 2", 5)]
    # slices left without their stamp are still never read by another build
    (work / "build.sha256").unlink(missing_ok=True)
    calls = []
    PassageIndex.build(passages[1:], embedder, encode=lambda t: calls.append(list(t)) or encode(t), work_dir=work)
    assert sum(map(len, calls)) == len(passages) - 1
    shutil.rmtree(work)
    work.mkdir()
    (work / "build.sha256").mkdir()  # a stamp that cannot be read or replaced
    with caplog.at_level(logging.WARNING):
        index = PassageIndex.build(passages, embedder, work_dir=work)
    assert len(index) == len(passages) and "not keeping embedded slices" in caplog.text
