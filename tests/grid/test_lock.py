"""One grid per run folder: a second grid process on the same --out exits 2 naming the holder's
pid; a lock left by a dead process is taken over with a log line; a truncated generation cache
is one line naming --rebuild-cache, which fixes it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from ragleak.errors import RunLockedError
from ragleak.grid.lock import RunLock

GRID = """
attacks: [ps]
defenses: [none]
corpora: [synthetic-corp]
budget: 1
"""


def _ragleak(*args):
    return subprocess.run([sys.executable, "-m", "ragleak.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAGLEAK_THREADS": "1"})


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_second_grid_on_one_folder_exits_2_with_the_holders_pid(tmp_path):
    (tmp_path / "grid.yaml").write_text(GRID)
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from ragleak.grid.lock import RunLock; "
                               "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(300)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = _ragleak("grid", "--config", str(tmp_path / "grid.yaml"), "--out", str(out), "--workers", "1")
        _one_line_error(proc, f"pid {holder.pid}", str(out))
        assert not (out / "cells").exists()  # nothing ran
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    # the holder died without releasing: the next grid takes the lock over
    with RunLock(out) as lock:
        assert f"pid {os.getpid()}" in lock.path.read_text()


def test_a_stale_lock_is_taken_over_with_a_log_line_and_a_live_one_refused(tmp_path, caplog):
    (tmp_path / "grid.lock").write_text("pid 999999999 on elsewhere\n")
    with caplog.at_level(logging.WARNING, logger="ragleak.grid.lock"):
        with RunLock(tmp_path):
            assert "pid 999999999" in caplog.text and "stale" in caplog.text
            with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
                RunLock(tmp_path).acquire()
    assert (tmp_path / "grid.lock").read_text() == ""  # released: free, with no holder to report
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ragleak.grid.lock"), RunLock(tmp_path):
        assert "stale" not in caplog.text


def test_a_truncated_grid_cache_is_one_line_naming_the_fix_and_rebuild_cache_runs(tmp_path, monkeypatch):
    from ragleak.grid import cell as cell_module
    from ragleak.grid.runner import run_grid
    from ragleak.grid.spec import load_grid_config
    from ragleak.rag.cache import CachedGenerator, GenerationCache
    from ragleak.rag.prompt import ChatMessage
    from ragleak.testing import ScriptedGenerator, copy_context, tiny_stack

    config = tmp_path / "grid.yaml"
    config.write_text(GRID)
    out = tmp_path / "run"
    cache = GenerationCache(out / "generations.sqlite")
    gen = CachedGenerator(ScriptedGenerator(model_id="m"), cache)
    for i in range(200):
        gen.generate([ChatMessage(role="user", content=f"question {i} " * 40)])
    cache.close()
    data = cache.path.read_bytes()
    cache.path.write_bytes(data[: len(data) // 3])

    proc = _ragleak("grid", "--config", str(config), "--out", str(out), "--workers", "1")
    _one_line_error(proc, "generations.sqlite", "--rebuild-cache")
    assert not (out / "plan.json").exists()  # refused before the run started

    monkeypatch.setattr(cell_module, "cell_stack", lambda spec, run_dir: tiny_stack(
        cache_path=out / "generations.sqlite", target=copy_context))
    state = run_grid(load_grid_config(config), out, workers=1, rebuild_cache=True)
    assert state.ran == 1 and state.errors == 0
    assert [p.name.split(".bad-")[0] for p in out.glob("generations.sqlite.bad-*")] == ["generations.sqlite"]
