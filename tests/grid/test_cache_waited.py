"""Hits served after waiting on another worker's in-progress generation (``cache_waited``) reach
the run's counters wherever hits do: the stack's per-role calls, the grid's progress and the
run summary. Two stacks in one process share one cache file (the cache's claim logic itself is
tested with real processes in tests/rag/test_cache_claims.py); the generators are scripted."""

from __future__ import annotations

import threading
import time

from ragleak.grid.runner import Progress
from ragleak.grid.spec import GridConfig
from ragleak.grid.store import CellRecord, RunStore
from ragleak.rag.prompt import ChatMessage
from ragleak.report.summary import summarize
from ragleak.testing import tiny_stack


def test_a_waited_hit_is_counted_by_the_stack_the_progress_and_the_summary(tmp_path):
    cache = tmp_path / "generations.sqlite"
    started = threading.Event()

    def slow(user):
        started.set()
        time.sleep(0.3)
        return f"answer to {user}"

    owner = tiny_stack(cache, target=slow)
    waiter = tiny_stack(cache, target=lambda user: "never asked")  # same model id: same keys
    ask = [ChatMessage(role="user", content="who?")]
    thread = threading.Thread(target=lambda: owner.generator("target").generate(ask))
    thread.start()
    assert started.wait(10)
    assert waiter.generator("target").generate(ask).text == "answer to who?"
    thread.join(timeout=10)
    waited = waiter.usage()
    assert waited.calls_by_role == {"target": {"model_calls": 0, "cache_hits": 1, "cache_waited": 1, "cache_repeats": 0}}
    assert (waited.model_calls, waited.cache_hits, waited.cache_waited) == (0, 1, 1)
    assert owner.usage().calls_by_role == {"target": {"model_calls": 1, "cache_hits": 0, "cache_waited": 0,
                                                      "cache_repeats": 0}}

    config = GridConfig(attacks=["ps"], defenses=["none", "pad-regex"], corpora=["synthetic-corp"])
    cells = config.expand()
    run = RunStore(tmp_path / "run")
    run.init(config, cells)
    state = Progress(total=len(cells), done=0)
    for spec, stack in zip(cells, (owner, waiter)):
        record = CellRecord(cell_id=spec.cell_id, spec=spec, status="error", error="not run", usage=stack.usage())
        run.write(record)
        state.add(record)
    assert (state.model_calls, state.cache_hits, state.cache_waited) == (1, 1, 1)
    summary = summarize(tmp_path / "run")
    assert (summary["model_calls"], summary["cache_hits"], summary["cache_waited"]) == (1, 1, 1)
    assert sorted(c["cache_waited"] for c in summary["cells_table"]) == [0, 1]
