"""Which file a profile came from: name, size, format and sha256 of the content that was read (the store's
idempotence key), plus an identity that finds a stored capture of the very same content without reading
all of it (``kbase top FILE`` answers from the store, ``snapshot`` says "already stored").

The identity must change whenever what a reader would read changes, including the ways that leave the
cheap metadata as it was: pages rewritten in place at the same size with the mtime put back by hand, pages
of another capture spliced in, a symlink pointed at an edited copy, a file replaced by ``mv``, a hard link
written through, committed frames added to (or checkpointed out of) a ``-wal``, a hot ``-journal``. So the
probe is a sha256 over, per file (symlinks followed: the target is what is read):

- a file of at most ``FULL_HASH_BYTES``: its size and the sha256 of all of it (exact: a copy on another
  machine still matches);
- a larger one: device, inode, size, mtime and ctime (ns), and its first and last ``PROBE_BLOCK`` bytes.
  ctime cannot be set by hand (writing, ``utime`` and ``chmod`` all set it to now) and device and inode
  change with ``mv`` or a retargeted link; a copy on another machine does not match and is read again
  (correct, only slower). A file whose mtime or ctime is less than ``RACY_NS`` old when the identity is
  taken may still change within the file system's timestamp granularity without a trace: that identity is
  "unsure" (``probe`` None) and is never stored or looked up;
- beside a single file, the SQLite side files that change its committed content (``-wal``, ``-journal``)
  the same way, and whether a ``-shm`` is there (its size: readers write to it, so its times are not used);
- for a folder of per-rank traces, each file's name with its identity (a rank added, removed or renamed).
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kbase.errors import InputError
from kbase.readers.sqlite_source import SIDE_SUFFIXES, side_files

PROBE_BLOCK = 1 << 16  # bytes hashed at each end of a large file for the probe
FULL_HASH_BYTES = 32 << 20  # files up to this size are hashed whole (66 ms at 32 MiB here): identity = content
RACY_NS = 2_000_000_000  # timestamps this recent may not yet show a change (coarse file system clocks: 1-2 s)


def _files(path: Path) -> list[Path]:
    return [p for p in sorted(path.iterdir()) if p.is_file()] if path.is_dir() else [path]


def _sha256_of(path: Path, h: hashlib._Hash | None = None) -> hashlib._Hash:
    h = h or hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)  # hashlib releases the GIL for large blocks: a reader thread keeps going
    return h


def file_sha256(path: Path, sqlite: bool = False) -> str:
    """The sha256 of what a reader reads: the file; a directory of per-rank traces: names and contents in
    order; with ``sqlite``, the side files SQLite applies (``-wal``, ``-journal``) after the file's own bytes
    (a file without any has the plain sha256 of its bytes, as baselines stored before always had)."""
    if path.is_dir():
        h = hashlib.sha256()
        for p in sorted(path.iterdir()):
            if p.is_file():
                h.update(p.name.encode())
                h.update(bytes.fromhex(file_sha256(p)))
        return h.hexdigest()
    h = _sha256_of(path)
    for suffix, side in side_files(path) if sqlite else []:
        h.update(f"\0kbase side file {suffix}\0".encode())
        _sha256_of(side, h)
    return h.hexdigest()


@dataclass(frozen=True)
class SourceIdentity:
    """What can be learned about a file without reading it all: total size, newest mtime (ns), and ``key``,
    the hash of the module's list. ``probe``: ``key`` when sure, None when a file changed in the last
    ``RACY_NS`` (then nothing is stored under it or found by it). ``stamp``: each file's stat as it was
    taken, and when (``unchanged_now``)."""

    size: int
    mtime_ns: int
    key: str
    sure: bool = True
    stamp: tuple = field(default=(), compare=False, repr=False)

    @property
    def probe(self) -> str | None:
        return self.key if self.sure else None


def _stat_regular(p: Path) -> os.stat_result:
    st = p.stat()
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end: never opened here
        raise InputError(f"{p}: not a regular file")
    return st


def _probe_file(h: hashlib._Hash, p: Path, st: os.stat_result) -> bool:
    """Hash one file's identity into ``h``; False when it is too recent to be sure of (``RACY_NS``)."""
    if st.st_size <= FULL_HASH_BYTES:  # exact: the content itself
        h.update(f"{st.st_size}\0".encode())
        h.update(_sha256_of(p).digest())
        return True
    h.update(f"{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0".encode())
    with open(p, "rb") as fh:
        h.update(fh.read(PROBE_BLOCK))
        fh.seek(max(PROBE_BLOCK, st.st_size - PROBE_BLOCK))
        h.update(fh.read(PROBE_BLOCK))
    return max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - RACY_NS


def _stat_of(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


Stat = tuple[bool, str, Path, "os.stat_result | None"]  # (a side file, its role or name, the file, its stat)


def _stats(path: Path) -> list[Stat]:
    """What the identity covers, each with its stat: the file(s) (a folder's by name), then each side file
    by suffix (stat None: absent)."""
    folder = path.is_dir()
    out: list[Stat] = [(False, p.name if folder else "", p, _stat_regular(p)) for p in _files(path)]
    if not folder:
        for suffix in (*SIDE_SUFFIXES, "-shm"):
            side = side_files(path, suffix, empty_too=True)
            out.append((True, suffix, side[0][1] if side else path, _stat_regular(side[0][1]) if side else None))
    return out


def _stamp(stats: list[Stat]) -> tuple:
    return tuple((side, role, None if st is None else st.st_size if role == "-shm" and side else _stat_of(st))
                 for side, role, _, st in stats)


def source_identity(path: Path) -> SourceIdentity:
    h = hashlib.sha256(b"kbase source identity 2\0")
    size = mtime = 0
    sure = True
    taken = time.time_ns()
    stats = _stats(path)
    for side, role, p, st in stats:
        if not side:
            assert st is not None
            size += st.st_size  # (a folder: each file by name, so a rank added, removed or renamed shows too)
            mtime = max(mtime, st.st_mtime_ns)
            h.update(f"{role}\0".encode())
            sure &= _probe_file(h, p, st)
        elif st is None:
            h.update(f"{role}: none\0".encode())
        elif role == "-shm":  # readers write to it: its times change without the content changing
            h.update(f"{role}: {st.st_size}\0".encode())
        else:
            h.update(f"{role}:\0".encode())
            sure &= _probe_file(h, p, st)
    return SourceIdentity(size=size, mtime_ns=mtime, key=h.hexdigest(), sure=sure, stamp=(taken, _stamp(stats)))


def unchanged_now(path: Path, before: SourceIdentity) -> bool:
    """Whether ``path`` still has the identity ``before``, cheaply: every file's device, inode, size, mtime
    and ctime as they were, all older than ``RACY_NS`` when ``before`` was taken (a later write would show
    in them); otherwise its identity taken again and compared. False also when it cannot be looked at."""
    try:
        if before.stamp:
            taken, stamp = before.stamp
            if _stamp(_stats(path)) == stamp and all(
                    s is None or isinstance(s, int) or max(s[3], s[4]) < taken - RACY_NS for _, _, s in stamp):
                return True
        after = source_identity(path)
    except (OSError, InputError):
        return False
    return (after.size, after.mtime_ns, after.key) == (before.size, before.mtime_ns, before.key)


@dataclass(frozen=True)
class SourceInfo:
    name: str
    sha256: str
    size: int
    format: str
    mtime_ns: int | None = None
    probe: str | None = None


def describe_source(path: Path, fmt: str, identity: SourceIdentity | None = None) -> SourceInfo:
    ident = identity or source_identity(path)
    return SourceInfo(name=path.name, sha256=file_sha256(path, sqlite=fmt == "nsys-sqlite"), size=ident.size,
                      format=fmt, mtime_ns=ident.mtime_ns, probe=ident.probe)


def unchanged_since(path: Path, before: SourceIdentity) -> None:
    """Refuse a profile that changed while it was read (its identity now differs from ``before``): what was
    read and what was hashed may then be different states of it, and neither may be stored."""
    after = source_identity(path)
    if (after.size, after.mtime_ns, after.key) != (before.size, before.mtime_ns, before.key):
        raise InputError(f"{path}: changed while kbase read it (a profiler or copy still writing?); "
                         "run again once it is complete")


class BackgroundSource:
    """``describe_source`` in a thread, overlapped with the work on the profile (the sha256 of a 10M-kernel
    export alone takes ~1.2 s of CPU; ``api.capture`` starts it once the pages are decoded). ``result()`` joins
    and returns it, re-raising what it raised."""

    def __init__(self, path: Path, fmt: str, identity: SourceIdentity | None = None) -> None:
        self._out: list[SourceInfo] = []
        self._err: list[BaseException] = []

        def work() -> None:
            try:
                self._out.append(describe_source(path, fmt, identity))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
                self._err.append(exc)

        self._thread = threading.Thread(target=work, name="kbase-sha256", daemon=True)
        self._thread.start()

    def result(self) -> SourceInfo:
        self._thread.join()
        if self._err:
            raise self._err[0]
        return self._out[0]
