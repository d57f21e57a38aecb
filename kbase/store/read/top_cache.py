"""The top cache: ``kbase top FILE`` answered again without reading the file, or importing numpy.

A leaderboard ``kbase top`` computed is kept as one file in ``cache/`` beside the SQLite store file
(``.kbase/cache/`` for the default store; for a PostgreSQL or in-memory store, ``.kbase/cache/`` under the
project root): never beside the profile, and never inside a profile folder. Its name is the sha256 of what
the answer depends on (``entry_key``): the profile's content identity (``readers.source``: the content of a
file up to 32 MiB, else device, inode, size, times and its first and last 64 KiB, with its side files),
the path as given (the summary names it), the window settings, the per-GPU view, kbase's version and a
stamp of the code that computes a leaderboard. A changed file has another identity, so it is a miss; an
unsure identity (a large file written in the last two seconds) is neither looked up nor stored.

An entry holds what the renderers take (``analysis.board.LeaderboardRows``): rows, summary, notes and the
per-iteration bounds, so every format renders byte for byte as from the computed leaderboard. Layout: a
magic line, the sha256 of the rest, then a JSON header (summary, notes, text columns, array sizes) and the
numeric columns as raw arrays. An entry that is damaged, foreign, of another version, byte order or key,
or larger than the cap is a miss, never an error; nothing here raises. Writers write a temporary file and
rename it (concurrent writers: the last complete one wins); the folder is kept under ``cache_max_mb``
(``Settings``), least recently used first out (a hit touches its entry).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbase.analysis.board import AnyLeaderboard, LeaderboardRows
    from kbase.readers.source import SourceIdentity
    from kbase.settings import Settings

CACHE_SCHEMA = 1
MAGIC = b"kbase top cache 1\n"
PREFIX, SUFFIX = "top-", ".kbtc"
STALE_TEMP_S = 3600  # a writer's temporary file older than this was left by a killed process
# What a corrupt or hostile entry could make a read do: caught, and the entry is a miss.
_DAMAGE = (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError,
           MemoryError, UnicodeError)


def cache_folder(settings: Settings) -> Path:
    """``cache/`` beside the SQLite store file; ``.kbase/cache`` under the project root for another store."""
    from kbase.store_urls import sqlite_path

    db_file = sqlite_path(settings.store_url())
    return (db_file.parent if db_file is not None else settings.root / ".kbase") / "cache"


def code_stamp() -> str:
    """The newest modification time and the count of the modules that read a profile and compute its
    leaderboard: a kbase edited in place (between version numbers) does not answer from an older entry."""
    root = Path(__file__).resolve().parents[2]
    newest, count = 0, 0
    for folder in (root, root / "readers", root / "readers" / "sqlite_pages", root / "analysis", root / "api"):
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for e in entries:
                if e.name.endswith(".py"):
                    newest, count = max(newest, e.stat().st_mtime_ns), count + 1
    return f"{newest}:{count}"


def entry_key(profile: Path, ident: SourceIdentity, settings: Settings, per_gpu: bool) -> str:
    from kbase.version import __version__

    parts = [f"kbase top cache {CACHE_SCHEMA}", __version__, code_stamp(), sys.byteorder, ident.key, str(profile),
             settings.window.key(), f"allow_missing_ranks={settings.window.allow_missing_ranks}",
             f"per_gpu={per_gpu}"]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class TopCache:
    """One profile's entry: ``load`` it, or ``save`` a computed leaderboard into it."""

    folder: Path
    key: str
    cap_bytes: int

    @property
    def file(self) -> Path:
        return self.folder / f"{PREFIX}{self.key}{SUFFIX}"

    def load(self) -> LeaderboardRows | None:
        """The entry as rows, or None (none, damaged, foreign, over the cap); a hit marks it recently used."""
        try:
            with open(self.file, "rb") as fh:
                if os.fstat(fh.fileno()).st_size > self.cap_bytes:
                    return None
                data = fh.read()
            rows = _decode(data, self.key)
        except _DAMAGE:
            return None
        if rows is not None:
            with contextlib.suppress(OSError):
                os.utime(self.file)
        return rows

    def save(self, lb: AnyLeaderboard) -> bool:
        """Keep ``lb`` (temporary file, then rename) and evict past the cap; False when it was not kept."""
        try:
            data = _encode(lb, self.key)
        except _DAMAGE:
            return False
        if data is None or len(data) > self.cap_bytes:
            return False
        import tempfile

        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix="." + PREFIX, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.file)
            tmp = None
        except OSError:
            return False
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        evict(self.folder, self.cap_bytes, keep=self.file)
        return True


def for_profile(profile: Path, settings: Settings, ident: SourceIdentity | None, per_gpu: bool) -> TopCache | None:
    """The cache entry of ``profile`` (None: the cache is off, or the identity is unsure or unknown)."""
    if settings.cache_max_mb <= 0 or ident is None or ident.probe is None:
        return None
    try:
        folder = cache_folder(settings)
        if profile.is_dir() and folder.resolve().is_relative_to(profile.resolve()):
            return None  # never inside a profile folder
    except (OSError, ValueError, RuntimeError):
        return None
    return TopCache(folder, entry_key(profile, ident, settings, per_gpu), settings.cache_max_mb << 20)


def evict(folder: Path, cap_bytes: int, keep: Path | None = None) -> None:
    """Remove the least recently used entries until the folder's entries fit in ``cap_bytes``, and
    temporary files a killed writer left; other files in the folder are not touched or counted."""
    now = time.time()
    entries = []
    with contextlib.suppress(OSError), os.scandir(folder) as it:
        for e in it:
            with contextlib.suppress(OSError):
                if e.name.startswith("." + PREFIX) and e.name.endswith(".tmp"):
                    if now - e.stat().st_mtime > STALE_TEMP_S:
                        os.unlink(e.path)
                elif e.name.startswith(PREFIX) and e.name.endswith(SUFFIX) and e.is_file(follow_symlinks=False):
                    st = e.stat()
                    entries.append((st.st_mtime_ns, st.st_size, e.path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= cap_bytes:
            break
        if keep is not None and path == str(keep):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            total -= size


# ------------------------------------------------------------------------------------------ the entry's bytes


def _typecode(values: list[Any]) -> str | None:
    """The array type holding every value exactly, or None (the column goes into the JSON header)."""
    kinds = {type(v) for v in values}
    if kinds == {float}:
        return "d"
    if kinds == {int} and all(-(1 << 63) <= v < (1 << 63) for v in values):
        return "q"
    if kinds == {bool}:
        return "?"
    return None


def _plain(o: Any) -> Any:
    """A numpy scalar in a summary as its Python value (the encoder's fallback)."""
    item = getattr(o, "item", None)
    if item is None:
        raise TypeError(f"{type(o).__name__} is not JSON")
    return item()


def _encode(lb: AnyLeaderboard, key: str) -> bytes | None:
    from kbase.analysis.board import board_of

    board = board_of(lb)
    columns, rows = list(board.columns), board.rows
    bounds = board.bounds()
    texts: dict[str, list[Any]] = {}
    arrays: list[list[Any]] = []
    payload: list[bytes] = []
    for c in columns:
        values = [r[c] for r in rows]
        code = _typecode(values)
        if code is None:
            texts[c] = values
            continue
        raw = array("b" if code == "?" else code, values).tobytes()
        arrays.append([c, code, len(raw)])
        payload.append(raw)
    names = sorted(bounds)
    for side in (0, 1):
        raw = array("d", [float(bounds[n][side]) for n in names]).tobytes()
        payload.append(raw)
    header = {"schema": CACHE_SCHEMA, "key": key, "byteorder": sys.byteorder, "columns": columns, "rows": len(rows),
              "summary": dataclasses.asdict(board.summary), "notes": list(board.notes), "texts": texts,
              "arrays": arrays, "bounds": names}
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":"), default=_plain).encode("utf-8",
                                                                                               "surrogatepass")
    body = b"%d\n" % len(head) + head + b"".join(payload)
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _decode(data: bytes, key: str) -> LeaderboardRows | None:
    from kbase.analysis.board import LeaderboardRows
    from kbase.analysis.summary import LeaderboardSummary

    if not data.startswith(MAGIC):
        return None
    digest, body = data[len(MAGIC):len(MAGIC) + 64], data[len(MAGIC) + 65:]
    if data[len(MAGIC) + 64:len(MAGIC) + 65] != b"\n" or hashlib.sha256(body).hexdigest().encode() != digest:
        return None
    size, _, rest = body.partition(b"\n")
    if not size.isdigit() or int(size) > len(rest):
        return None
    header = json.loads(rest[:int(size)].decode("utf-8", "surrogatepass"))
    if not isinstance(header, dict) or (header.get("schema"), header.get("key"), header.get("byteorder")) != (
            CACHE_SCHEMA, key, sys.byteorder):
        return None
    columns, n = header["columns"], header["rows"]
    values: dict[str, list[Any]] = {c: list(v) for c, v in header["texts"].items()}
    at = int(size)
    for c, code, nbytes in header["arrays"]:
        col = array("b" if code == "?" else code)
        col.frombytes(rest[at:at + nbytes])
        at += nbytes
        values[c] = [v != 0 for v in col] if code == "?" else col.tolist()
    names = header["bounds"]
    lo, hi = array("d"), array("d")
    for side in (lo, hi):
        side.frombytes(rest[at:at + 8 * len(names)])
        at += 8 * len(names)
    if at != len(rest) or set(values) != set(columns) or any(len(values[c]) != n for c in columns) or \
            len(lo) != len(names):
        return None
    fields = {f.name for f in dataclasses.fields(LeaderboardSummary)}
    if set(header["summary"]) != fields or not all(isinstance(t, str) for t in header["notes"]):
        return None
    summary = LeaderboardSummary(**header["summary"])
    bounds = {name: (a, b) for name, a, b in zip(names, lo.tolist(), hi.tolist())}
    rows = [dict(zip(columns, row)) for row in zip(*(values[c] for c in columns))]
    return LeaderboardRows(columns=list(columns), rows=rows, summary=summary, notes=list(header["notes"]),
                           bounds=lambda: bounds)
