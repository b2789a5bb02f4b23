"""A rich progress bar for the library's ``progress(done, total)`` callbacks (index building):
passages done of all, passages/s and the time left."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} passages/s" if speed else "- passages/s")


@contextmanager
def embedding_progress(console: Console, label: str = "embedding") -> Iterator[Callable[[int, int], None]]:
    """A callback to hand to ``Stack.index_corpus(progress=...)``; the bar appears on ``console``
    (stderr) once the passages are known, and is cleared when done (non-terminals show nothing)."""
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), _RateColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(), console=console, transient=True)
    task: list = []

    def update(done: int, total: int) -> None:
        if not task:
            task.append(bar.add_task(label, total=total))
        bar.update(task[0], completed=done, total=total)

    with bar:
        yield update
