"""Index kinds (flat / ivf / hnsw, ``auto`` by a size threshold), the SQLite passage store read
lazily by FAISS id, schema-1 indexes still loading, and a killed IVF build resuming with every
passage exactly once."""

from __future__ import annotations

import json
import sqlite3

import faiss
import numpy as np
import pytest

from ragleak import stack as stack_module
from ragleak.errors import IndexStoreError
from ragleak.rag import index as index_module
from ragleak.rag.index import PassageIndex, choose_kind, ivf_lists
from ragleak.rag.passage_store import PassageStore
from ragleak.records import Passage

WORDS = ("ferry harbour orchard violin glacier bakery chess railway beekeeping pottery lighthouse regatta "
         "opera courier coral printing volcano archive river market clinic asthma telescope servo").split()


def _passages(n: int, per_doc: int = 3) -> list[Passage]:
    rng = np.random.default_rng(7)
    return [Passage(id=f"d{i // per_doc}#{i % per_doc}", doc_id=f"d{i // per_doc}",
                    text=" ".join(rng.choice(WORDS, size=12)) + f" record {i}.", metadata={"n": i})
            for i in range(n)]


@pytest.fixture(scope="module")
def passages():
    return _passages(90)


@pytest.fixture(scope="module")
def flat(passages, embedder):
    return PassageIndex.build(passages, embedder, kind="flat")


def test_the_store_round_trips_and_a_loaded_file_is_copied_before_a_change(tmp_path):
    rows = [(i, p) for i, p in enumerate(_passages(7))]
    store = PassageStore()
    store.add(rows)
    assert len(store) == 7 and store.get_many([5, 2, 99]) == {5: rows[5][1], 2: rows[2][1]}
    assert list(store.all()) == rows and store.chunks_per_document() == {"d0": 3, "d1": 3, "d2": 1}
    with pytest.raises(IndexStoreError, match="already in the index"):
        store.add([(7, rows[0][1])])
    store.save_to(tmp_path / "p.sqlite")
    before = (tmp_path / "p.sqlite").read_bytes()
    loaded = PassageStore.open(tmp_path / "p.sqlite")
    assert loaded.path is not None and list(loaded.all()) == rows and loaded.get(6) == rows[6][1]
    loaded.remove([0, 1])  # copied into memory first: the saved (checksummed) file is never written
    assert loaded.path is None and len(loaded) == 5 and len(PassageStore.open(tmp_path / "p.sqlite")) == 7
    assert (tmp_path / "p.sqlite").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.sqlite"]  # no journal or -wal left beside it
    (tmp_path / "bad.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(IndexStoreError, match="rebuild"):
        PassageStore.open(tmp_path / "bad.sqlite")


def test_a_loaded_index_reads_only_the_passages_a_search_returns(tmp_path, flat, embedder):
    flat.save(tmp_path / "idx")
    loaded = PassageIndex.load(tmp_path / "idx", embedder)
    statements: list[str] = []
    loaded._store._db.set_trace_callback(statements.append)
    hits = loaded.search("violin glacier record", 4)
    assert [(h.passage, h.score) for h in hits] == [(h.passage, h.score) for h in flat.search("violin glacier record", 4)]
    reads = [s for s in statements if s.startswith("SELECT") and "text" in s]
    assert len(reads) == 1 and reads[0].count(",") == 4 + 4 - 1  # five columns, four ids: one lookup
    assert loaded._store.path == (tmp_path / "idx" / "passages.sqlite").resolve()  # still the file, not a copy
    assert len(loaded) == 90 and loaded.passages == flat.passages


def test_auto_builds_flat_up_to_the_threshold_and_ivf_above_it(tmp_path, passages, embedder, monkeypatch):
    assert choose_kind(50_000) == "flat" and choose_kind(50_001) == "ivf" and choose_kind(10, "hnsw") == "hnsw"
    assert ivf_lists(100_000) == 1265 and ivf_lists(3) == 3
    with pytest.raises(IndexStoreError, match="unknown index kind"):
        choose_kind(10, "pq")
    monkeypatch.setattr(index_module, "APPROXIMATE_ABOVE", 60)
    small = PassageIndex.build(passages[:60], embedder)
    large = PassageIndex.build(passages, embedder)
    assert (small.kind, small.exact) == ("flat", True)
    assert (large.kind, large.exact, large.scores_every_passage) == ("ivf", False, True)
    assert large.params["nlist"] == ivf_lists(90) and large.params["trained_on"] == 90
    large.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["kind"] == "ivf" and manifest["params"] == large.params and manifest["schema_version"] == 2
    loaded = PassageIndex.load(tmp_path / "idx", embedder)
    assert loaded.kind == "ivf" and loaded._faiss.nprobe == large.params["nprobe"]
    manifest["kind"] = "flat"  # a manifest that lies about its FAISS file
    (tmp_path / "idx" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexStoreError, match="says flat"):
        PassageIndex.load(tmp_path / "idx", embedder)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_kinds_still_score_every_passage_exactly_on_demand(flat, passages, embedder, kind):
    index = PassageIndex.build(passages, embedder, kind=kind)
    ids, vectors = index.vectors()
    assert sorted(ids.tolist()) == list(range(90)) and vectors.shape == (90, embedder.dim)
    for query in ("chess railway", "record 17", "a lighthouse by the coral reef"):
        exact = index.score_all(query)
        reference = flat.score_all(query)
        assert [h.passage.id for h in exact] == [h.passage.id for h in reference]
        assert np.allclose([h.score for h in exact], [h.score for h in reference], atol=1e-5)
        assert [h.passage.id for h in index.best_per_document(query)] == [h.passage.id for h in flat.best_per_document(query)]
        assert [h.passage.id for h in index.search(query, 5, exact=True)] == [h.passage.id for h in reference[:5]]
        approximate = index.search(query, 5)
        assert len(approximate) <= 5 and all(h.passage in passages for h in approximate)
    other = index.with_kind("flat")
    assert other.kind == "flat" and other.passages == flat.passages
    assert [h.passage.id for h in other.search("record 3", 5)] == [h.passage.id for h in flat.search("record 3", 5)]


def test_removal_works_on_ivf_and_is_refused_clearly_on_hnsw(passages, embedder):
    ivf = PassageIndex.build(passages, embedder, kind="ivf")
    assert ivf.remove_documents(["d0", "d5"]) == 6 and len(ivf) == 84
    assert sorted(ivf.vectors()[0].tolist()) == [i for i in range(90) if i // 3 not in (0, 5)]
    assert all(h.passage.doc_id not in ("d0", "d5") for h in ivf.score_all("record 1"))
    hnsw = PassageIndex.build(passages, embedder, kind="hnsw")
    with pytest.raises(IndexStoreError, match="hnsw index cannot remove"):
        hnsw.remove_documents(["d0"])
    assert len(hnsw) == 90


def test_an_index_saved_by_schema_1_still_loads(tmp_path, flat, embedder):
    from ragleak.files import sha256_file

    old = tmp_path / "old"
    old.mkdir()
    faiss.write_index(flat._faiss, str(old / "index.faiss"))
    with open(old / "passages.jsonl", "w", encoding="utf-8") as f:
        for i, p in enumerate(flat.passages):
            f.write(json.dumps({"faiss_id": i, **p.model_dump(mode="json")}) + "\n")
    manifest = {"schema_version": 1, "embedder": embedder.name, "dim": embedder.dim, "passages": 90, "documents": 30,
                "next_id": 90, "metadata": {"source": "old"},
                "sha256": {n: sha256_file(old / n) for n in ("index.faiss", "passages.jsonl")}}
    (old / "manifest.json").write_text(json.dumps(manifest))
    loaded = PassageIndex.load(old, embedder)
    assert loaded.kind == "flat" and loaded.passages == flat.passages and loaded.metadata == {"source": "old"}
    assert [h.passage.id for h in loaded.search("opera", 3)] == [h.passage.id for h in flat.search("opera", 3)]
    loaded.save(tmp_path / "new")  # saving writes the current schema
    assert json.loads((tmp_path / "new" / "manifest.json").read_text())["schema_version"] == 2
    manifest["schema_version"] = 0
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexStoreError, match="schema version 0.*rebuild it"):
        PassageIndex.load(old, embedder)


def test_a_killed_ivf_build_resumes_with_every_passage_exactly_once(tmp_path, passages, embedder, monkeypatch, flat):
    # the same simulated kill as test_index_store's flat resume test, on the IVF path
    monkeypatch.setattr(index_module, "EMBED_SLICE", 16)  # 90 passages: 6 slices
    monkeypatch.setattr(stack_module, "_LOADED", {})
    work, encode, calls = tmp_path / "slices", embedder.encode, []

    def dies_after_three_slices(texts):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(len(texts))
        return encode(texts)

    with pytest.raises(KeyboardInterrupt):
        PassageIndex.build(passages, embedder, encode=dies_after_three_slices, work_dir=work, kind="ivf")
    assert len(list(work.glob("*.npy"))) == 3
    calls.clear()
    resumed = PassageIndex.build(passages, embedder, encode=lambda t: calls.append(len(t)) or encode(t),
                                 work_dir=work, kind="ivf")
    assert sum(calls) == 90 - 48 and resumed.build_stats["resumed"] == 48 and resumed.build_stats["embedded"] == 42
    ids, _ = resumed.vectors()
    assert sorted(ids.tolist()) == list(range(90))  # every passage once, none twice
    assert len({p.id for p in resumed.passages}) == len(resumed) == 90
    assert [h.passage.id for h in resumed.score_all("river market")] == [h.passage.id for h in flat.score_all("river market")]


def test_the_stack_passes_the_kind_and_keeps_auto_keys(passages, monkeypatch):
    from ragleak.records import Document
    from ragleak.testing import tiny_stack

    monkeypatch.setattr(stack_module, "_LOADED", {})
    docs = [Document(id=f"doc{i}", text=f"Record {i}: the ferry to island {i} leaves from pier {i % 3}.")
            for i in range(12)]
    stack = tiny_stack()
    auto, hnsw = stack.index(docs), stack.index(docs, kind="hnsw")
    assert (auto.kind, hnsw.kind) == ("flat", "hnsw") and stack.index(docs) is auto


def test_sqlite_is_the_only_passage_storage(tmp_path, flat):
    flat.save(tmp_path / "idx")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["index.faiss", "manifest.json", "passages.sqlite"]
    with sqlite3.connect(tmp_path / "idx" / "passages.sqlite") as db:
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM passages").fetchone() == (90, 90)
