"""One Kineto trace file -> compact columns (the per-file half of :mod:`kbase.readers.kineto`).

Events are decoded one at a time (:mod:`kbase.readers.kineto_json`) into ``array`` columns. An
event whose timestamp or duration is missing, not a number, negative or absurd is never read as
data: it is counted by kind and reason, and the count becomes a note (kernel events past
``MAX_INVALID_FRACTION`` of the file make it an error, see :mod:`kbase.readers.integrity`).
Names are kept as they are except for characters no output can carry (lone surrogates, NUL).
"""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import numpy as np

from kbase.errors import InputError
from kbase.readers.integrity import (
    MAX_NAME_CHARS,
    NameTooLong,
    check_name,
    clean_text,
    describe_reasons,
    invalid_rows_note,
)
from kbase.readers.kineto_events import (
    _ACTIVITY_CATS,
    _CORR_LIMIT,
    _FLOW_CATS,
    _KERNEL_CATS,
    _LAUNCH_CATS,
    _MODULE_PREFIX,
    _RANGE_CATS,
    _TS_LIMIT,
    MAX_DEVICE,
    _corr_of,
    _FileData,
    _Flaws,
    _ns_ok,
    _span_flaw,
    is_sync_call,
)
from kbase.readers.kineto_ids import ThreadIds
from kbase.readers.kineto_json import _events, _open_text, _Stream
from kbase.readers.profile import RANGE_MODULE


def _read_one(path: Path) -> _FileData:
    label = str(path)
    meta: dict = {}
    fd = _FileData()
    fd.path, fd.label, fd.meta = path, label, meta
    k_start, k_end, k_dev, k_corr = array("q"), array("q"), array("q"), array("q")
    k_names: list[str] = []
    k_nocorr: list[tuple[int, int, int]] = []  # (kernel index, lane key, ts) for the flow fallback
    r_start, r_end, r_tid, r_kind = array("q"), array("q"), array("q"), array("b")
    r_names: list[str] = []
    l_corr, l_tid, l_ts = array("q"), array("q"), array("q")
    fs_id, fs_tid, fs_ts = array("q"), array("q"), array("q")
    ff_id, ff_tid, ff_ts = array("q"), array("q"), array("q")
    a_start, a_end, a_dev, a_corr, a_kind = array("q"), array("q"), array("q"), array("q"), array("b")
    s_start, s_end, s_tid = array("q"), array("q"), array("q")
    open_ranges: dict[int, list[int]] = {}
    thread_names: dict[int, str] = {}
    process_names: dict[int, str] = {}
    trace_span: list[int | None] = [None, None]
    names: dict[str, str] = {}
    fixed_names: list[str] = []  # names that needed clean_text
    cats: dict = {}
    flaws = _Flaws()
    ids = ThreadIds(label)
    key = ids.key

    def named(nm: str, what: str) -> str:
        """``nm``, or an ``InputError`` naming the file when it is past ``MAX_NAME_CHARS``."""
        try:
            return check_name(nm, f"{what} name")
        except NameTooLong as exc:
            raise InputError(f"{label}: {exc}") from None

    def intern(nm: str, what: str) -> str:
        """One str object per distinct name, cleaned once (and refused past ``MAX_NAME_CHARS``)."""
        got = names.get(nm)
        if got is None:
            got = names[nm] = clean_text(named(nm, what))
            if got is not nm:
                fixed_names.append(got)
        return got

    ev_decoder = json.JSONDecoder(parse_float=str)  # keep fractional µs as text: exact ns
    meta_decoder = json.JSONDecoder()
    read, close = _open_text(path, label)
    stream = _Stream(read, label)
    n_events = 0
    try:
        for ev in _events(stream, meta, ev_decoder, meta_decoder):
            if type(ev) is not dict:
                continue
            n_events += 1
            cat = ev.get("cat")
            if cat is None:
                if ev.get("ph") == "M":
                    nm = ev.get("name")
                    a = ev.get("args")
                    if isinstance(a, dict) and isinstance(a.get("name"), str):
                        if nm == "thread_name":
                            thread_names[key(ev.get("pid"), ev.get("tid"))] = clean_text(named(a["name"], "thread"))
                        elif nm == "process_name":
                            process_names[ids.pid_code(ev.get("pid"))] = clean_text(named(a["name"], "process"))
                continue
            try:
                lc = cats[cat]
            except (KeyError, TypeError):
                lc = cat.lower() if isinstance(cat, str) else ""
                try:
                    cats[cat] = lc
                except TypeError:
                    pass
            ph = ev.get("ph")
            if lc in _KERNEL_CATS:
                if ph != "X":
                    continue
                args = ev.get("args")
                if not isinstance(args, dict):
                    args = {}
                ts = _ns_ok(ev.get("ts"))
                dur = _ns_ok(ev.get("dur"))
                why = _span_flaw(ts, dur)
                dev = args.get("device")
                if type(dev) is not int:
                    pid = ev.get("pid")
                    dev = pid if type(pid) is int and 0 <= pid <= MAX_DEVICE else 0
                elif not 0 <= dev <= MAX_DEVICE:
                    why = why or "with an invalid device"
                if why is not None or ts is None or dur is None:
                    flaws.add("kernel", why or "without a valid ts")
                    continue
                k_start.append(ts)
                k_end.append(ts + dur)
                k_dev.append(dev)
                corr = _corr_of(args)
                if corr is None:
                    k_nocorr.append((len(k_corr), key(ev.get("pid"), ev.get("tid")), ts))
                    corr = -1
                k_corr.append(corr)
                nm = ev.get("name")
                if not isinstance(nm, str):
                    nm = a_nm if isinstance(a_nm := args.get("name"), str) else "<unnamed kernel>"
                k_names.append(intern(nm, "kernel"))
            elif lc in _LAUNCH_CATS:
                args = ev.get("args")
                nm = ev.get("name")
                if ph == "X" and type(nm) is str and is_sync_call(nm):
                    ts = _ns_ok(ev.get("ts"))
                    dur = _ns_ok(ev.get("dur"))
                    if _span_flaw(ts, dur) is None and ts is not None and dur is not None:
                        s_start.append(ts)
                        s_end.append(ts + dur)
                        s_tid.append(key(ev.get("pid"), ev.get("tid")))
                corr = _corr_of(args) if isinstance(args, dict) else None
                if corr is not None and ph == "X":
                    ts = _ns_ok(ev.get("ts"))
                    if ts is None:
                        flaws.add("launch", "without a valid ts")
                        continue
                    l_corr.append(corr)
                    l_tid.append(key(ev.get("pid"), ev.get("tid")))
                    l_ts.append(ts)
            elif lc in _ACTIVITY_CATS:
                if ph != "X":
                    continue
                args = ev.get("args")
                if not isinstance(args, dict):
                    args = {}
                ts = _ns_ok(ev.get("ts"))
                dur = _ns_ok(ev.get("dur"))
                dev = args.get("device")
                if type(dev) is not int:
                    pid = ev.get("pid")
                    dev = pid if type(pid) is int and 0 <= pid <= MAX_DEVICE else 0
                if _span_flaw(ts, dur) is not None or ts is None or dur is None or not 0 <= dev <= MAX_DEVICE:
                    flaws.add("activity", _span_flaw(ts, dur) or "with an invalid device")
                    continue
                a_start.append(ts)
                a_end.append(ts + dur)
                a_dev.append(dev)
                corr = _corr_of(args)
                a_corr.append(-1 if corr is None else corr)
                a_kind.append(_ACTIVITY_CATS[lc])
            elif lc in _RANGE_CATS:
                nm = ev.get("name")
                range_kind = _RANGE_CATS[lc]
                if range_kind == RANGE_MODULE and not (isinstance(nm, str) and nm.startswith(_MODULE_PREFIX)):
                    continue  # Python frames other than module calls: not a scope
                nm = intern(nm, "range") if isinstance(nm, str) else str(nm)[:MAX_NAME_CHARS]
                if ph == "X":
                    ts = _ns_ok(ev.get("ts"))
                    dur = _ns_ok(ev.get("dur"))
                    if ts is None or dur is None or dur < 0:
                        flaws.add("range", _span_flaw(ts, dur) or "with a negative dur")
                        continue
                    r_start.append(ts)
                    r_end.append(ts + dur)
                    r_tid.append(key(ev.get("pid"), ev.get("tid")))
                    r_kind.append(range_kind)
                    r_names.append(nm)
                elif ph == "B":
                    t = key(ev.get("pid"), ev.get("tid"))
                    ts = _ns_ok(ev.get("ts"))
                    if ts is None:  # keep the stack aligned: its E must not close the parent
                        flaws.add("range", "without a valid ts")
                        open_ranges.setdefault(t, []).append(-1)
                        continue
                    open_ranges.setdefault(t, []).append(len(r_start))
                    r_start.append(ts)
                    r_end.append(-1)
                    r_tid.append(t)
                    r_kind.append(range_kind)
                    r_names.append(nm)
                elif ph == "E":
                    stack = open_ranges.get(key(ev.get("pid"), ev.get("tid")))
                    if stack:
                        i = stack.pop()
                        ts = _ns_ok(ev.get("ts"))
                        if i >= 0 and ts is not None and ts >= r_start[i]:
                            r_end[i] = ts
                        elif i >= 0:
                            flaws.add("range", "with an invalid end")
            elif lc in _FLOW_CATS:
                fid = ev.get("id")
                if type(fid) is not int or not 0 <= fid < _CORR_LIMIT or ph not in ("s", "f"):
                    continue
                ts = _ns_ok(ev.get("ts"))
                if ts is None:
                    flaws.add("flow", "without a valid ts")
                    continue
                if ph == "s":
                    fs_id.append(fid)
                    fs_tid.append(key(ev.get("pid"), ev.get("tid")))
                    fs_ts.append(ts)
                else:
                    ff_id.append(fid)
                    ff_tid.append(key(ev.get("pid"), ev.get("tid")))
                    ff_ts.append(ts)
            elif lc == "trace" and ph == "X":
                ts = _ns_ok(ev.get("ts"))
                dur = _ns_ok(ev.get("dur"))
                if ts is None or dur is None or dur < 0:
                    continue  # the span is a hint; the kernels' own times bound the capture too
                trace_span[0] = ts if trace_span[0] is None else min(trace_span[0], ts)
                trace_span[1] = ts + dur if trace_span[1] is None else max(trace_span[1], ts + dur)
    finally:
        close()

    if n_events == 0 and meta.get("_format") == "list":
        raise InputError(f"{label}: JSON but not a PyTorch profiler trace (no trace events)")
    base = meta.get("baseTimeNanoseconds")
    if base is not None:
        if type(base) is float and base.is_integer():
            base = meta["baseTimeNanoseconds"] = int(base)
        if type(base) is not int or not 0 <= base < _TS_LIMIT:
            raise InputError(f"{label}: baseTimeNanoseconds {base!r} is not a time in ns; the trace cannot be placed")
    n_bad = flaws.total("kernel")
    if not len(k_start) and not n_bad:
        from kbase.readers.trace_formats import foreign_format

        other = foreign_format(meta, cats.values(), [*process_names.values(), *thread_names.values()])
        if other:
            raise InputError(f"{label}: {other}, not a PyTorch profiler trace: kbase reads PyTorch profiler (Kineto) "
                             "traces and Nsight Systems exports")
        raise InputError(f"{label}: PyTorch profiler trace without GPU kernel events (CPU-only capture?)")
    notes = []
    note = invalid_rows_note(label, "kernel events", n_bad, n_bad + len(k_start), flaws.by_kind.get("kernel", {}))
    if note:
        notes.append(note)
    for kind, what in (("range", "annotation ranges"), ("launch", "launch calls"), ("flow", "flow events"),
                       ("activity", "memcpy/memset events")):
        if flaws.total(kind):
            notes.append(f"ignored {flaws.total(kind):,} {what} ({describe_reasons(flaws.by_kind[kind])})")
    if fixed_names:
        notes.append(f"{len(fixed_names)} name(s) held characters no output can carry (NUL, lone surrogates): "
                     "shown with U+FFFD")

    fd.k_start, fd.k_end, fd.k_dev, fd.k_corr, fd.k_names = k_start, k_end, k_dev, k_corr, k_names
    fd.k_nocorr = k_nocorr
    fd.r_start, fd.r_end, fd.r_tid, fd.r_kind, fd.r_names = r_start, r_end, r_tid, r_kind, r_names
    fd.l_corr, fd.l_tid, fd.l_ts = l_corr, l_tid, l_ts
    fd.fs_id, fd.fs_tid, fd.fs_ts = fs_id, fs_tid, fs_ts
    fd.ff_id, fd.ff_tid, fd.ff_ts = ff_id, ff_tid, ff_ts
    fd.trace_span = trace_span
    fd.a_start, fd.a_end, fd.a_dev, fd.a_corr, fd.a_kind = a_start, a_end, a_dev, a_corr, a_kind
    fd.s_start, fd.s_end, fd.s_tid = s_start, s_end, s_tid
    fd.thread_names, fd.process_names = thread_names, process_names
    fd.notes = notes
    return fd


def _launches(fd: _FileData, activities: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """launch_tid / launch_start (slot bits not yet set) for each kernel of one file (``activities``: for each
    memcpy / memset instead; those have no flow fallback)."""
    ids = fd.a_corr if activities else fd.k_corr
    n = len(ids)
    corr = np.frombuffer(ids, dtype=np.int64).copy() if n else np.empty(0, np.int64)
    if not activities and fd.k_nocorr and len(fd.ff_id):
        by_lane: dict[tuple[int, int], int] = {}
        for fid, lane, ts in zip(fd.ff_id, fd.ff_tid, fd.ff_ts):
            by_lane.setdefault((lane, ts), fid)
        for i, lane, ts in fd.k_nocorr:
            flow_id = by_lane.get((lane, ts))
            if flow_id is not None:
                corr[i] = flow_id
    # launch records: API calls first, flow starts only where no API call carries the id
    l_corr = np.concatenate([np.frombuffer(fd.l_corr, np.int64), np.frombuffer(fd.fs_id, np.int64)])
    l_tid = np.concatenate([np.frombuffer(fd.l_tid, np.int64), np.frombuffer(fd.fs_tid, np.int64)])
    l_ts = np.concatenate([np.frombuffer(fd.l_ts, np.int64), np.frombuffer(fd.fs_ts, np.int64)])
    launch_tid = np.full(n, -1, dtype=np.int64)
    launch_start = np.full(n, -1, dtype=np.int64)
    if len(l_corr):
        _, first = np.unique(l_corr, return_index=True)  # first occurrence = API call when both exist
        lc, lt, ls = l_corr[first], l_tid[first], l_ts[first]  # sorted by correlation
        pos = np.searchsorted(lc, corr)
        pos_c = np.minimum(pos, len(lc) - 1)
        hit = (corr >= 0) & (lc[pos_c] == corr)
        launch_tid[hit] = lt[pos_c[hit]]
        launch_start[hit] = ls[pos_c[hit]]
    return launch_tid, launch_start


