"""Kineto's process and thread ids -> the small integer codes of kbase's thread keys.

A key is ``pid << PID_SHIFT | tid`` (:mod:`kbase.readers.kineto`: the keys of a multi-rank profile add the
file's slot above it). An OS id below ``_ID_LIMIT`` is kept as it is; any other id (a larger number, a
string such as ``"Spans"``, a list) gets the next code from ``_ID_LIMIT`` on, per process for threads.
"""

from __future__ import annotations

from kbase.errors import InputError

PID_SHIFT = 24
_ID_LIMIT = 1 << 23  # OS ids below this are kept as they are


class ThreadIds:
    """One trace file's OS pid/tid -> the codes in its keys (``pid << PID_SHIFT | tid``)."""

    def __init__(self, label: str):
        self.label = label
        self.pids: dict = {}
        self.tids: dict = {}
        self.n_tids: dict[int, int] = {}  # odd tids numbered so far, per process code
        self.cache: dict = {}

    @staticmethod
    def _plain(v):
        if type(v) is str:
            s = v.strip()
            if s.lstrip("-").isdigit():
                return int(s)
        elif type(v) in (list, dict):  # unhashable: an id nobody writes, still one key per value
            return repr(v)
        return v

    def pid_code(self, pid) -> int:
        pid = self._plain(pid)
        if type(pid) is int and 0 <= pid < _ID_LIMIT:
            return pid
        code = self.pids.get(pid)
        if code is None:
            code = self.pids[pid] = self._next(len(self.pids), "process")
        return code

    def _next(self, n: int, what: str) -> int:
        if n >= _ID_LIMIT:  # the code would spill into the rank bits of the keys
            raise InputError(f"{self.label}: more than {_ID_LIMIT:,} distinct non-numeric {what} ids")
        return _ID_LIMIT + n

    def key(self, pid, tid) -> int:
        """Thread key without the slot bits."""
        try:
            return self.cache[(pid, tid)]
        except (KeyError, TypeError):
            pass
        pc = self.pid_code(pid)
        t = self._plain(tid)
        tc: int
        if type(t) is int and 0 <= t < _ID_LIMIT:
            tc = t
        elif (known := self.tids.get((pc, t))) is not None:
            tc = known
        else:
            n = self.n_tids.get(pc, 0)
            tc = self.tids[(pc, t)] = self._next(n, "thread")
            self.n_tids[pc] = n + 1
        k = (pc << PID_SHIFT) | tc
        try:
            self.cache[(pid, tid)] = k
        except TypeError:
            pass
        return k
