"""Which file a profile came from: name, size, format and sha256 (the store's idempotence key), plus a
cheap identity (mtime and a probe hash of the first and last blocks) that finds a stored capture of the
same file without reading all of it."""

from __future__ import annotations

import hashlib
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from kbase.errors import InputError

PROBE_BLOCK = 1 << 16  # bytes hashed at each end of a file for the probe


def _files(path: Path) -> list[Path]:
    return [p for p in sorted(path.iterdir()) if p.is_file()] if path.is_dir() else [path]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():  # a directory of per-rank traces: hash names and contents in order
        for p in sorted(path.iterdir()):
            if p.is_file():
                h.update(p.name.encode())
                h.update(bytes.fromhex(file_sha256(p)))
        return h.hexdigest()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)  # hashlib releases the GIL for large blocks: a reader thread keeps going
    return h.hexdigest()


@dataclass(frozen=True)
class SourceIdentity:
    """What can be learned about a file without reading it all: total size, newest mtime (ns) and a
    sha256 of each file's name, size and first and last ``PROBE_BLOCK`` bytes."""

    size: int
    mtime_ns: int
    probe: str


def source_identity(path: Path) -> SourceIdentity:
    h = hashlib.sha256()
    size = mtime = 0
    for p in _files(path):
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end: never opened here
            raise InputError(f"{p}: not a regular file")
        size += st.st_size
        mtime = max(mtime, st.st_mtime_ns)
        h.update(f"{p.name if path.is_dir() else ''}\0{st.st_size}\0".encode())
        with open(p, "rb") as fh:
            h.update(fh.read(PROBE_BLOCK))
            if st.st_size > PROBE_BLOCK:
                fh.seek(max(PROBE_BLOCK, st.st_size - PROBE_BLOCK))
                h.update(fh.read(PROBE_BLOCK))
    return SourceIdentity(size=size, mtime_ns=mtime, probe=h.hexdigest())


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
    return SourceInfo(name=path.name, sha256=file_sha256(path), size=ident.size, format=fmt, mtime_ns=ident.mtime_ns,
                      probe=ident.probe)


class BackgroundSource:
    """``describe_source`` in a thread, overlapped with reading the profile (the sha256 of a 10M-kernel
    export alone took 1.5–1.8 s). ``result()`` joins and returns it, re-raising what it raised."""

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
