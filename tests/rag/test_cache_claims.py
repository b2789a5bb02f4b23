"""In-progress claims in the generation cache: two workers reaching one prompt at once run the
model once; a claim left by a killed process, a silent owner or a failed generation never blocks
or loses the entry. Real processes (spawn) share one cache file; the generator is scripted (slow
where the test needs a generation to be in progress)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import threading
import time

import pytest

from ragleak.errors import RagleakError
from ragleak.rag.cache import (CACHE_SCHEMA_VERSION, CachedGenerator, GenerationCache, cache_key,
                               process_alive)
from ragleak.rag.generator import DecodingParams
from ragleak.rag.prompt import ChatMessage, render_chatml
from ragleak.testing import ScriptedGenerator

SPAWN = mp.get_context("spawn")


def _msgs(text):
    return [ChatMessage(role="user", content=text)]


def _key(text, params=DecodingParams()):
    return cache_key("scripted-model", params, render_chatml(_msgs(text)))


def _slow(started=None, seconds=0.0, fail=False):
    """A script that signals ``started`` (the claim is held: the model is running), sleeps, then
    answers with the reversed prompt or raises."""
    def reply(user):
        if started is not None:
            started.set()
        time.sleep(seconds)
        if fail:
            raise RagleakError("the model failed")
        return user[::-1]
    return reply


def _gen(path, lease_s=None, **slow):
    return CachedGenerator(ScriptedGenerator(_slow(**slow), model_id="scripted-model"),
                           GenerationCache(path, lease_s=lease_s))


def _claims(path):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT key, pid FROM claims").fetchall()


# -- child processes (module level: spawn imports them) ------------------------------------------

def _racer(path, prompts, barrier, queue):
    gen = _gen(path, seconds=0.15)
    barrier.wait()  # both processes start on the same prompt at the same moment
    texts = [gen.generate(_msgs(p)).text for p in prompts]
    queue.put((gen.inner.calls, gen.hits, gen.waited, texts))


def _owner(path, prompt, started, seconds, fail, lease_s):
    gen = _gen(path, lease_s=lease_s, started=started, seconds=seconds, fail=fail)
    try:
        gen.generate(_msgs(prompt))
    except RagleakError:
        pass


def _start_owner(path, prompt, seconds, fail=False, lease_s=None):
    started = SPAWN.Event()
    proc = SPAWN.Process(target=_owner, args=(path, prompt, started, seconds, fail, lease_s))
    proc.start()
    assert started.wait(30), "the owner never reached its generation"
    return proc


# -- tests ---------------------------------------------------------------------------------------

def test_two_processes_run_the_model_once_per_key(tmp_path):
    path = tmp_path / "c.sqlite"
    GenerationCache(path)
    prompts = [f"prompt {i}" for i in range(4)]
    barrier, queue = SPAWN.Barrier(2), SPAWN.Queue()
    procs = [SPAWN.Process(target=_racer, args=(path, prompts, barrier, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert all(texts == [p[::-1] for p in prompts] for *_, texts in results)
    assert sum(calls for calls, *_ in results) == len(prompts)  # not one repeated generation
    assert sum(hits for _, hits, _, _ in results) == len(prompts)  # each prompt: one call, one hit
    assert _claims(path) == []


def test_a_waiter_serves_the_owners_entry_as_a_waited_hit_while_the_heartbeat_keeps_the_claim(tmp_path):
    path = tmp_path / "c.sqlite"
    # the owner's lease (0.2 s) is far shorter than its generation (1 s): only its heartbeat
    # (every lease / 4) keeps the waiter from taking over
    owner = _start_owner(path, "long answer", seconds=1.0, lease_s=0.2)
    waiter = _gen(path)
    out = waiter.generate(_msgs("long answer"))
    owner.join(timeout=30)
    assert out.text == "rewsna gnol" and out.cached
    assert waiter.inner.calls == 0 and waiter.misses == 0 and waiter.hits == 1 and waiter.waited == 1
    assert waiter.takeovers == 0 and owner.exitcode == 0 and _claims(path) == []


def test_an_unclaimed_call_skips_a_prompt_another_worker_is_generating_and_a_later_call_serves_it(tmp_path):
    path = tmp_path / "c.sqlite"
    owner = _start_owner(path, "busy", seconds=1.0)
    gen = _gen(path)
    assert gen.generate_unclaimed(_msgs("busy")) is None  # neither waited for nor generated here
    assert gen.inner.calls == gen.misses == gen.hits == 0 and gen.shares_claims
    assert gen.generate_unclaimed(_msgs("free")).text == "eerf" and gen.inner.calls == 1
    out = gen.generate(_msgs("busy"))  # the waiting call: the owner's entry, never a second generation
    owner.join(timeout=30)
    assert out.text == "ysub" and out.cached and gen.inner.calls == 1 and gen.hits == 1
    assert owner.exitcode == 0 and _claims(path) == []
    assert not CachedGenerator(ScriptedGenerator(model_id="m"), None).shares_claims


def test_a_claim_left_by_a_killed_process_is_taken_over(tmp_path):
    path = tmp_path / "c.sqlite"
    owner = _start_owner(path, "orphan", seconds=60, lease_s=30)  # would hold its claim for a minute
    assert [pid for _, pid in _claims(path)] == [owner.pid]
    os.kill(owner.pid, signal.SIGKILL)  # not reaped yet: a zombie must count as dead too
    waiter = _gen(path)
    t = time.perf_counter()
    out = waiter.generate(_msgs("orphan"))
    assert time.perf_counter() - t < 5  # not the lease (30 s): the dead pid was seen
    assert out.text == "nahpro" and not out.cached
    assert waiter.inner.calls == 1 and waiter.takeovers == 1 and waiter.cache.takeovers == 1
    assert waiter.generate(_msgs("orphan")).cached and _claims(path) == []
    owner.join(timeout=30)
    assert owner.exitcode == -signal.SIGKILL


def test_a_generator_that_raises_releases_its_claim(tmp_path):
    path = tmp_path / "c.sqlite"
    failing = _gen(path, fail=True)
    with pytest.raises(RagleakError):
        failing.generate(_msgs("q"))
    assert _claims(path) == [] and len(failing.cache) == 0  # errors are never cached

    owner = _start_owner(path, "fails elsewhere", seconds=0.4, fail=True, lease_s=60)
    waiter = _gen(path)
    t = time.perf_counter()
    out = waiter.generate(_msgs("fails elsewhere"))  # waits, finds no entry, generates it itself
    owner.join(timeout=30)
    assert time.perf_counter() - t < 10  # the release freed it, not the 60 s lease
    assert out.text == "erehwesle sliaf" and not out.cached and waiter.inner.calls == 1 and waiter.waited == 0
    assert waiter.takeovers == 0 and _claims(path) == []


def _plant_claim(path, key, pid, heartbeat_age, lease, host=None, started=""):
    from ragleak.rag import cache as cache_module

    now = time.time()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (key, "someone", host or cache_module._HOST, pid, started, now - heartbeat_age,
                      now - heartbeat_age, lease))


def test_a_stale_heartbeat_is_taken_over_and_a_live_one_is_not(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = GenerationCache(path)
    # a live process on another host (no pid check possible): only its heartbeat speaks for it
    _plant_claim(path, _key("silent"), os.getpid(), heartbeat_age=1000, lease=300, host="elsewhere")
    _plant_claim(path, _key("busy"), os.getpid(), heartbeat_age=1, lease=300, host="elsewhere")
    assert cache.claim(_key("busy")) is None  # live: wait for it

    gen = _gen(path)
    out = gen.generate(_msgs("silent"))
    assert out.text == "tnelis" and gen.inner.calls == 1 and gen.takeovers == 1
    assert _claims(path) == [(_key("busy"), os.getpid())]


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/stat"), reason="process start times come from /proc")
def test_a_reused_pid_does_not_keep_a_dead_owners_claim(tmp_path):
    path = tmp_path / "c.sqlite"
    GenerationCache(path)
    # this test process's pid, but a different start time: the owner that claimed it is gone
    _plant_claim(path, _key("reused"), os.getpid(), heartbeat_age=0, lease=300, started="1")
    gen = _gen(path)
    assert gen.generate(_msgs("reused")).text == "desuer" and gen.takeovers == 1
    assert process_alive(os.getpid(), "") and not process_alive(os.getpid(), "1")


def test_a_batch_being_decoded_elsewhere_is_waited_for_as_one(tmp_path):
    path = tmp_path / "c.sqlite"
    params = DecodingParams(batch=2)
    started = threading.Event()
    owner = _gen(path, started=started, seconds=0.3)
    waiter = _gen(path)
    batch = [_msgs("one"), _msgs("two")]
    thread = threading.Thread(target=lambda: owner.generate_many(batch, params))
    thread.start()
    assert started.wait(10)
    out = waiter.generate_many(batch, params)
    thread.join(timeout=10)
    assert [g.text for g in out] == ["eno", "owt"] and all(g.cached for g in out)
    assert owner.inner.batches == [2] and waiter.inner.calls == 0 and waiter.hits == 2 and waiter.waited == 2
    assert _claims(path) == []


def test_a_schema_2_cache_keeps_its_entries_when_claims_are_added(tmp_path):
    path = tmp_path / "v2.sqlite"
    gen = _gen(path)
    gen.generate(_msgs("kept"))
    gen.cache.close()
    with sqlite3.connect(path) as conn:  # back to schema 2: no claims table
        conn.execute("DROP TABLE claims")
        conn.execute("PRAGMA user_version=2")
    again = _gen(path)
    assert again.generate(_msgs("kept")).cached and again.inner.calls == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == CACHE_SCHEMA_VERSION == 3
        assert conn.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def test_a_lease_must_be_positive(tmp_path, monkeypatch):
    with pytest.raises(RagleakError):
        GenerationCache(tmp_path / "c.sqlite", lease_s=0)
    monkeypatch.setenv("RAGLEAK_CACHE_LEASE_S", "45")
    assert GenerationCache(tmp_path / "c.sqlite").lease_s == 45.0
    monkeypatch.setenv("RAGLEAK_CACHE_LEASE_S", "soon")
    with pytest.raises(RagleakError, match="RAGLEAK_CACHE_LEASE_S"):
        GenerationCache(tmp_path / "c.sqlite")


def _forked_claim(path, queue):
    claim = GenerationCache(path).claim("forked")
    queue.put(claim is not None)
    time.sleep(5)  # stays alive, holding the claim, until the test is done with it


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_a_forked_childs_claim_is_its_own_not_its_parents(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = GenerationCache(path)
    cache.claim("warm up")  # the parent has looked up its own start time before forking
    ctx, queue = mp.get_context("fork"), mp.get_context("fork").Queue()
    child = ctx.Process(target=_forked_claim, args=(path, queue))
    child.start()
    try:
        assert queue.get(timeout=30)
        assert cache.claim("forked") is None  # the child is alive: its claim holds
    finally:
        child.kill()
        child.join(timeout=10)


def test_a_failed_heartbeat_does_not_stop_the_next_ones(tmp_path, monkeypatch):
    cache = GenerationCache(tmp_path / "c.sqlite", lease_s=0.08)  # a beat every 20 ms
    claim = cache.claim(_key("long"))
    beats = []

    def renew(c):
        beats.append(time.monotonic())
        if len(beats) == 1:
            raise sqlite3.OperationalError("database is locked")
        return True

    monkeypatch.setattr(cache, "renew", renew)
    with cache.holding(claim):
        time.sleep(0.3)
    assert len(beats) >= 3  # it kept beating after the first failure
    assert _claims(tmp_path / "c.sqlite") == []


def test_a_claim_is_released_when_reading_the_entry_after_winning_it_fails(tmp_path, monkeypatch):
    path = tmp_path / "c.sqlite"
    gen = _gen(path)
    reads, read = [], gen._read

    def flaky(key):  # the first read (the miss) works; the one right after winning the claim fails
        reads.append(key)
        if len(reads) > 1:
            assert _claims(path) == [(key, os.getpid())]
            raise sqlite3.OperationalError("disk I/O error")
        return read(key)

    monkeypatch.setattr(gen, "_read", flaky)
    with pytest.raises(sqlite3.OperationalError):
        gen.generate(_msgs("unlucky"))
    assert len(reads) == 2 and _claims(path) == []  # nobody waits out a lease on it
