"""One grid process per run directory: an advisory lock file in RUN_DIR.

Two grids on one ``--out`` would both run every pending cell (each sees the other's cells as not
yet finished). The lock is an ``flock`` on ``RUN_DIR/grid.lock``, which the kernel releases when
its holder dies however it dies, so a killed grid never blocks the next one; the file holds the
holder's pid and host, for the refusal message and for the takeover log line.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
from pathlib import Path

from ragleak.errors import RunLockedError

log = logging.getLogger(__name__)

LOCK_NAME = "grid.lock"


def _holder(fd: int) -> str:
    return os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()


class RunLock:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd) or "unknown pid"
            os.close(fd)
            raise RunLockedError(f"another grid ({holder}) is running in {self.root}; wait for it to finish or "
                                 "stop it, or use another --out") from None
        previous = _holder(fd)
        if previous:  # written by a holder that died without releasing (a clean exit empties the file)
            log.warning("took over the stale lock %s of %s, which is no longer running", self.path, previous)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        # the file stays (unlinking it would let a waiter lock an orphaned inode); empty = free
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
