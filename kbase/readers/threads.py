"""How many threads a reader decodes with: a second one only while a core is idle.

The nsys reader decodes the kernel and the runtime table at once, on two threads: on idle cores that
shortens the answer (the runtime table is about a third of the reading). A second thread is not free, though
(scheduling, caches shared: 5-9% more CPU seconds for ``kbase top`` of 1M kernels), and where every core is
busy — a CI runner running other jobs — it shortens nothing: both threads wait for the same cores. So the
reader takes the second thread only when fewer tasks are runnable right now than the machine has cores
(Linux's ``/proc/loadavg``, which counts this one); ``KBASE_READ_THREADS`` (1 or 2) decides instead.

The threads themselves: :class:`Pool` (the reader's tables, the budget's GPUs, the names classified beside the
window).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any


def reader_threads(loadavg: str = "/proc/loadavg") -> int:
    """1 or 2: the threads the reader may decode with now (see the module)."""
    fixed = os.environ.get("KBASE_READ_THREADS", "")
    if fixed in ("1", "2"):
        return int(fixed)
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    if usable < 2:
        return 1
    try:
        with open(loadavg, encoding="ascii") as fh:
            runnable = int(fh.read().split()[3].split("/")[0])  # "0.52 0.58 0.59 2/467 12345": 2 runnable now
    except (OSError, ValueError, IndexError):
        return 2  # no such count here (not Linux): as on idle cores
    return 2 if runnable < (os.cpu_count() or usable) else 1


class Task:
    """One call handed to a :class:`Pool`: ``result()`` waits for it and returns what it returned or raises what
    it raised. Its function and arguments are let go once it has run (they may hold large arrays)."""

    __slots__ = ("_fn", "_args", "_done", "_value", "_error")

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self._fn: Callable[..., Any] | None = fn
        self._args: tuple | None = args
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def run(self) -> None:
        fn, args = self._fn, self._args
        self._fn = self._args = None
        try:
            self._value = fn(*args)  # type: ignore[misc]
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc
        finally:
            del fn, args
            self._done.set()

    def result(self) -> Any:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


class Pool:
    """Up to ``workers`` threads running the calls handed to ``submit`` in order; leaving the ``with`` block waits
    for every call. What kbase needs of ``concurrent.futures.ThreadPoolExecutor``, which imports ``logging``
    with it (~5 ms of every ``kbase top``, more than a small export's reading)."""

    def __init__(self, workers: int) -> None:
        self._workers = max(1, workers)
        self._queue: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> Task:
        task = Task(fn, args)
        self._queue.put(task)
        if len(self._threads) < self._workers:
            thread = threading.Thread(target=self._work, daemon=True)
            thread.start()
            self._threads.append(thread)
        return task

    def map(self, fn: Callable[..., Any], items: Iterable[Any]) -> list[Any]:
        """``fn`` of each item, on the pool's threads, in the items' order."""
        tasks = [self.submit(fn, item) for item in items]
        return [t.result() for t in tasks]

    def _work(self) -> None:
        while (task := self._queue.get()) is not None:
            task.run()
            del task  # (not kept while waiting for the next)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
