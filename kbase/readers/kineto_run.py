"""Which files make up a multi-rank Kineto profile, and whether they are one run.

A directory (or list) of per-rank traces is read as one profile only when nothing is lost or
mixed in silently:

- Every ``*.json`` / ``*.json.gz`` entry is a rank, unless it is a small, complete, non-empty JSON
  document that is not a trace (a ``config.json``): those are listed in ``extra["ignored_files"]``. A rank that
  cannot be read (corrupt gzip, not JSON, cut short, unreadable, a link to nothing) is an error
  naming the file — or, with ``allow_missing_ranks``, left out and recorded in
  ``extra["missing_ranks"]`` and a note.
- The same trace twice is refused: one file reached twice (link, repeated argument), a ``.json``
  and a ``.json.gz`` of one name, or two files with identical kernels (a copy).
- Traces of different runs are refused: different world sizes, a rank outside its world, more
  traces than the world has ranks, a process-group setup that differs (``RUN_INFO_KEYS``), trace
  formats or profiler versions that differ, job ids (``JOB_KEYS``) that differ, or capture times
  more than ``MAX_RUN_GAP_NS`` apart. The trace
  name (``traceName``) is not compared: it differs per rank by design (host, pid, rank number).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from kbase.errors import InputError
from kbase.readers.kineto_file import _FileData, _read_one
from kbase.readers.kineto_json import _trace_files_in, looks_like_trace_text, sniff

# Metadata keys naming the job that wrote a trace (seen in Meta/MAST traces); equal on every rank.
JOB_KEYS = ("tw_job", "mast_job_name", "mast_job_attempt", "job_name", "job_id")
# distributedInfo entries every rank of one run shares (rank differs, pg_config may list per-rank groups).
RUN_INFO_KEYS = ("backend", "nccl_version", "pg_count")
# The ranks of one run capture the same steps at the same time; allow for unsynchronised clocks.
MAX_RUN_GAP_NS = 10 * 60 * 10**9
ALLOW_REMEDY = ("allow_missing_ranks", "reads the others and shows the loss")


# --------------------------------------------------------------------------------------------
# which files


def _is_other_json(path: Path) -> bool:
    """A small, complete JSON document with content that is not a trace (a ``config.json``): left
    out. Anything else is read as a rank, so that what is wrong with it is said, not skipped."""
    got = sniff(path)
    if got is None:
        return False
    text, complete = got
    body = text.lstrip("\ufeff \t\r\n")
    if not complete or not body.startswith(("{", "[")) or looks_like_trace_text(body):
        return False
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return False  # broken: reading it as a rank says what is wrong
    return bool(doc)  # an empty {} or [] may be a rank that wrote nothing


def rank_files(paths) -> tuple[list[Path], Path, list[Path]]:
    """(the files to read, one per rank; the profile's source; non-trace JSON files left out)."""
    if isinstance(paths, (str, os.PathLike)):
        p = Path(paths)
        if not p.is_dir():
            return [p], p, []
        files: list[Path] = []
        ignored: list[Path] = []
        for f in _trace_files_in(p):
            (ignored if _is_other_json(f) else files).append(f)
        if not files:
            raise InputError(f"{p}: no PyTorch profiler traces (.json / .json.gz) in this directory")
        return files, p, ignored
    files, ignored = [], []
    for item in paths:
        item = Path(item)
        if item.is_dir():
            sub, _, sub_ignored = rank_files(item)
            files += sub
            ignored += sub_ignored
        else:
            files.append(item)
    if not files:
        raise InputError("no PyTorch profiler trace given")
    if len(files) == 1:
        return files, files[0], ignored
    try:
        source = Path(os.path.commonpath([str(f.resolve()) for f in files]))
    except ValueError:
        source = files[0]
    return files, source, ignored


def _stem(path: Path) -> str:
    name = path.name
    return name.removesuffix(".gz")


def check_distinct_files(files: list[Path]) -> None:
    """Refuse one trace reached twice: the same file, or a .json and a .json.gz of one name."""
    seen: dict[tuple[int, int], Path] = {}
    stems: dict[tuple[Path, str], Path] = {}
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue  # unreadable: reported when it is read
        ident = (st.st_dev, st.st_ino)
        if ident in seen:
            raise InputError(f"{f}: the same file as {seen[ident]} (a link or a repeated argument); "
                             "read each rank once")
        seen[ident] = f
        stem = (f.parent, _stem(f))
        if stem in stems:
            raise InputError(f"{f}: the same trace as {stems[stem]} (.json and .json.gz of one name); keep one of them")
        stems[stem] = f


# --------------------------------------------------------------------------------------------
# reading, with or without the ranks that cannot be read


def read_ranks(files: list[Path], source: Path, allow_missing_ranks: bool) -> tuple[list[_FileData], list[dict]]:
    """Each file read; an unreadable one is an error, or with ``allow_missing_ranks`` recorded as
    {"file", "reason"} and left out."""
    data: list[_FileData] = []
    missing: list[dict] = []
    for f in files:
        try:
            data.append(_read_one(f))
        except InputError as exc:
            if len(files) == 1:
                raise
            if not allow_missing_ranks:
                raise InputError(f"{exc} [one of {len(files)} rank traces in {source}]", remedy=ALLOW_REMEDY) from None
            missing.append({"file": str(f), "reason": str(exc)})
    if not data:
        raise InputError(f"{source}: none of its {len(files)} rank traces can be read (first: {missing[0]['reason']})")
    return data, missing


def check_distinct_content(data: list[_FileData]) -> None:
    """Refuse two files holding the same trace (a copy of one rank under another name): same
    metadata, kernels and launches. Different ranks differ in all three (ns timings, pids)."""
    seen: dict[bytes, str] = {}
    for fd in data:
        digest = hashlib.blake2b(json.dumps(fd.meta, sort_keys=True, default=str).encode(), digest_size=16)
        for column in (fd.k_start, fd.k_end, fd.l_tid, fd.l_ts):
            digest.update(memoryview(column).cast("B"))
        key = digest.digest()
        if key in seen:
            raise InputError(f"{fd.label}: the same trace as {seen[key]} (a copy of one rank's trace?); "
                             "keep one of them")
        seen[key] = fd.label


# --------------------------------------------------------------------------------------------
# one run?


def world_size(meta: dict) -> int | None:
    info = meta.get("distributedInfo")
    ws = info.get("world_size") if isinstance(info, dict) else None
    return ws if type(ws) is int and ws >= 1 else None


def _when(ns: int) -> str:
    if 946_684_800 * 10**9 <= ns < 4_102_444_800 * 10**9:  # 2000..2100: an epoch time
        return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{ns / 1e9:,.3f} s"


def _gap(ns: int) -> str:
    s = ns / 1e9
    return f"{s / 86400:,.1f} days" if s >= 2 * 86400 else f"{s / 3600:,.1f} hours" if s >= 7200 else f"{s:,.0f} s"


def check_one_run(data: list[_FileData], source: Path, spans: list[tuple[int, int]], versions: list[str],
                  ranks: list[int | None]) -> None:
    """Refuse traces that are not the ranks of one run. ``spans``: each file's capture (absolute
    ns); ``versions``: each file's profiler version; ``ranks``: each file's declared rank."""
    if len(data) < 2:
        return
    names = [Path(fd.label).name for fd in data]
    sizes = [world_size(fd.meta) for fd in data]
    declared = {ws for ws in sizes if ws is not None}
    if len(declared) > 1:
        by_size = {ws: n for n, ws in zip(names, sizes) if ws is not None}
        detail = ", ".join(f"{ws} in {n}" for ws, n in sorted(by_size.items()))
        raise InputError(f"{source}: traces of different runs (world size {detail}); give the traces of one run")
    if declared and None in sizes:
        has, lacks = names[sizes.index(next(iter(declared)))], names[sizes.index(None)]
        raise InputError(f"{source}: traces of different runs ({has} is a rank of a world of {next(iter(declared))}, "
                         f"{lacks} has no distributedInfo); give the traces of one run")
    if declared:
        ws = next(iter(declared))
        for n, r in zip(names, ranks):
            if r is not None and r >= ws:
                raise InputError(f"{source}: {n} is rank {r} of a world of {ws}: not a trace of this run")
        if len(data) > ws:
            raise InputError(f"{source}: {len(data)} traces for a world of {ws} ranks; give the traces of one run")
    info: list[dict] = [d if isinstance(d := fd.meta.get("distributedInfo"), dict) else {} for fd in data]
    for info_key in RUN_INFO_KEYS:
        values = {n: str(i[info_key]) for n, i in zip(names, info) if i.get(info_key) is not None}
        if len(set(values.values())) > 1:
            detail = ", ".join(f"{v!r} in {n}" for n, v in list(values.items())[:3])
            raise InputError(f"{source}: traces of different runs (distributedInfo.{info_key}: {detail}); "
                             "give the traces of one run")
    if len(set(versions)) > 1:
        detail = ", ".join(f"{v!r} ({n})" for v, n in dict(zip(versions, names)).items())
        raise InputError(f"{source}: traces written by different profiler versions ({detail}): not one run")
    for job_key in JOB_KEYS:
        values = {n: str(v) for n, fd in zip(names, data) if isinstance(v := fd.meta.get(job_key), (str, int))}
        if len(set(values.values())) > 1:
            detail = ", ".join(f"{v!r} in {n}" for n, v in list(values.items())[:3])
            raise InputError(f"{source}: traces of different jobs ({job_key}: {detail}); give the traces of one run")
    starts = np.array([s[0] for s in spans], dtype=np.int64)
    ends = np.array([s[1] for s in spans], dtype=np.int64)
    late, early = int(np.argmax(starts)), int(np.argmin(ends))
    gap = int(starts[late]) - int(ends[early])
    if gap > MAX_RUN_GAP_NS:
        raise InputError(
            f"{source}: traces captured {_gap(gap)} apart ({names[early]} ends {_when(int(ends[early]))}, "
            f"{names[late]} starts {_when(int(starts[late]))}); the ranks of one run overlap in time"
        )


def absent_ranks(data: list[_FileData], ranks: list[int | None]) -> tuple[int, list[int]]:
    """(world size, ranks of it with no trace here) for a multi-rank set that declares its world."""
    sizes = {world_size(fd.meta) for fd in data}
    if len(data) < 2 or len(sizes) != 1 or None in sizes or None in ranks:
        return 0, []
    ws = sizes.pop()
    assert ws is not None  # None was excluded above
    return ws, sorted(set(range(ws)) - {r for r in ranks if r is not None})


def ranges_text(values: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7'."""
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(f"{values[i]}-{values[j]}" if j > i else f"{values[i]}")
        i = j + 1
    return ", ".join(out)
