"""Cache integrity: a corrupt entry is detected, discarded, regenerated and counted; a file SQLite
cannot read is one clear error naming the fix; an old (checksum-less) cache is upgraded."""

from __future__ import annotations

import sqlite3

import pytest

from ragleak.errors import CacheCorruptError
from ragleak.rag.cache import CACHE_SCHEMA_VERSION, CachedGenerator, GenerationCache, move_cache_aside
from ragleak.rag.prompt import ChatMessage
from ragleak.testing import ScriptedGenerator


def _gen(path):
    return CachedGenerator(ScriptedGenerator(lambda user: f"answer to {user}", model_id="scripted-model"),
                           GenerationCache(path))


def _ask(gen, text):
    return gen.generate([ChatMessage(role="user", content=text)])


def _fill(path, prompts):
    gen = _gen(path)
    texts = [_ask(gen, p).text for p in prompts]
    gen.cache.close()  # the last connection folds the WAL into the file we corrupt below
    return texts


def test_flipped_bytes_in_a_stored_answer_are_detected_and_healed(tmp_path):
    path = tmp_path / "c.sqlite"
    prompts = ["alpha question", "bravo question", "charlie question"]
    clean = _fill(path, prompts)
    data = bytearray(path.read_bytes())
    at = data.index(b"answer to bravo")
    data[at + 10] ^= 0x01  # "bravo" -> "cravo" on disk; SQLite itself checks nothing
    path.write_bytes(bytes(data))

    gen = _gen(path)
    again = [_ask(gen, p) for p in prompts]
    assert [g.text for g in again] == clean
    assert gen.repairs == 1 and gen.cache.repairs == 1
    assert gen.inner.calls == 1 and gen.hits == 2  # only the corrupt entry was regenerated
    assert _ask(gen, "bravo question").cached and gen.repairs == 1  # the healed entry serves again


def test_an_edited_entry_is_never_served(tmp_path):
    path = tmp_path / "c.sqlite"
    _fill(path, ["q"])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE generations SET generation = replace(generation, 'answer', 'ANSWER')")
    gen = _gen(path)
    assert _ask(gen, "q").text == "answer to q" and gen.repairs == 1


def test_a_truncated_cache_is_one_error_naming_the_fix_and_rebuild_starts_fresh(tmp_path):
    path = tmp_path / "c.sqlite"
    _fill(path, [f"question {i} " * 40 for i in range(200)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(CacheCorruptError) as err:
        GenerationCache(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "--rebuild-cache" in message

    aside = move_cache_aside(path)
    assert aside is not None and aside.exists() and not path.exists()
    gen = _gen(path)
    assert _ask(gen, "q").text == "answer to q" and len(gen.cache) == 1


def test_an_old_cache_without_checksums_is_upgraded(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:  # the schema ragleak wrote before entries had checksums
        conn.execute("CREATE TABLE generations (key TEXT PRIMARY KEY, model_id TEXT NOT NULL, params TEXT NOT "
                     "NULL, prompt TEXT NOT NULL, generation TEXT NOT NULL, created REAL NOT NULL)")
        conn.execute("INSERT INTO generations VALUES ('k', 'm', '{}', 'p', '{}', 0)")
    cache = GenerationCache(path)
    assert len(cache) == 0  # unverifiable entries are dropped, not trusted
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == CACHE_SCHEMA_VERSION
    gen = _gen(path)
    assert _ask(gen, "q").text == "answer to q" and _ask(gen, "q").cached


def test_a_newer_schema_is_rejected(tmp_path):
    path = tmp_path / "new.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version={CACHE_SCHEMA_VERSION + 1}")
    with pytest.raises(CacheCorruptError, match="newer"):
        GenerationCache(path)
