"""Stored kernel tables in tests: edit one in place (decode a baseline's ``baseline_kernels`` blobs, change the
``KernelTable``, write it back: the odd values a store may hold), and dump every baseline's kernel data the
same way from any revision (0008's row per kernel, or 0009's blobs) to compare a store across migrations."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import inspect, text

from kbase.analysis.sketch import CHUNKS, COUNT, QUANTILES, TOTAL, WIDTH
from kbase.store.codec import format1
from kbase.store.codec.id_lists import id_list, ids_of
from kbase.store.codec.kernel_blobs import Blobs, KernelTable, decode, encode
from kbase.store.codec.mantissa import QUANTILE_BITS, SAMPLE_BITS

LEADERBOARD = ("name_id", "gpus", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns", "std_ns",
               "per_iter_ns", "count_per_iter", "share_window", "share_kernel", "amdahl_ceiling", "fragmented")


def edit_kernels(path: str, baseline_id: int, edit: Callable[[KernelTable], None]) -> KernelTable:
    conn = sqlite3.connect(path)
    try:
        with conn:
            row = conn.execute("SELECT levels, board, samples, sketches, kernel_ids FROM baseline_kernels "
                               "WHERE baseline_id = ?", (baseline_id,)).fetchone()
            t = decode(Blobs(*row[:4]), ids_of(row[4]))
            edit(t)
            b = encode(t)
            conn.execute("UPDATE baseline_kernels SET levels = ?, board = ?, samples = ?, sketches = ?, kernels = ?, "
                         "kernel_ids = ? WHERE baseline_id = ?", (b.levels, b.board, b.samples, b.sketches, len(t),
                                                                  id_list(t.name_id.tolist()), baseline_id))
    finally:
        conn.close()
    return t


def _value(v: Any) -> Any:
    """A stored value as both layouts compare it: NULL/NaN as None, booleans and ints as ints."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool | np.bool_):
        return int(v)
    return v.item() if isinstance(v, np.generic) else v


def dump_kernels(engine) -> dict[int, dict[str, Any]]:
    """baseline id -> {"rows": leaderboard rows in rank order, "ns"/"count": (kernels, keys) samples or None,
    "sketches": (kernels, CHUNKS, WIDTH) or None}, from 0008's ``baseline_kernel`` or 0009's blobs."""
    tables = set(inspect(engine).get_table_names())
    out: dict[int, dict[str, Any]] = {}
    with engine.connect() as conn:
        keys = {b: len(json.loads(k)) for b, k in conn.execute(text("SELECT id, iteration_keys FROM baseline"))}
        if "baseline_kernels" in tables:  # (format 1 before 0014: the name ids in the levels blob)
            v2 = "kernel_ids" in {c["name"] for c in inspect(engine).get_columns("baseline_kernels")}
            for bid, ids, *blobs in conn.execute(text(f"SELECT baseline_id, {'kernel_ids' if v2 else 'NULL'}, levels, "
                                                      "board, samples, sketches FROM baseline_kernels")):
                b = Blobs(*(None if x is None else bytes(x) for x in blobs))
                t = decode(b, ids_of(bytes(ids))) if v2 else format1.decode(b)
                out[bid] = {"rows": [tuple(_value(getattr(t, c)[i]) for c in LEADERBOARD) for i in range(len(t))],
                            "ns": t.iter_ns, "count": t.iter_count, "sketches": t.sketches}
            return out
        cols = [c["name"] for c in inspect(engine).get_columns("baseline_kernel")]
        res = conn.execute(text("SELECT * FROM baseline_kernel ORDER BY baseline_id, rank")).mappings().all()
    for r in res:
        d = out.setdefault(r["baseline_id"], {"rows": [], "ns": [], "count": [], "sketches": []})
        d["rows"].append(tuple(_value(r[c]) for c in LEADERBOARD))
        n = keys[r["baseline_id"]]
        for key, col in (("ns", "iter_ns"), ("count", "iter_count")):
            a = np.zeros(n)
            blob = r[col]
            if blob:
                v = np.frombuffer(bytes(blob), dtype="<f4")[:n]
                a[: len(v)] = v
            d[key].append(a)
        blob = r["launch_sketch"] if "launch_sketch" in cols else None
        d["sketches"].append(np.frombuffer(bytes(blob), dtype="<f4").astype(float).reshape(CHUNKS, WIDTH)
                             if blob and len(blob) == CHUNKS * WIDTH * 4 else np.full((CHUNKS, WIDTH), np.nan))
    for bid, d in out.items():
        has_samples = keys[bid] > 0 and any(a.any() for a in d["count"])
        d["ns"] = np.array(d["ns"]) if has_samples else None
        d["count"] = np.array(d["count"]) if has_samples else None
        sk = np.array(d["sketches"])
        d["sketches"] = sk if np.isfinite(sk[:, :, :QUANTILES]).any() else None
    return out


def assert_same_kernels(before: dict, after: dict) -> None:
    """Two dumps hold the same kernel data: every leaderboard value exactly, launch counts exactly, per-iteration
    ns and chunk totals within ``SAMPLE_BITS``' error and sketch quantiles within ``QUANTILE_BITS``'."""
    assert before.keys() == after.keys()
    for bid, b in before.items():
        a = after[bid]
        assert a["rows"] == b["rows"], bid
        assert (a["ns"] is None) == (b["ns"] is None), bid
        if b["ns"] is not None:
            np.testing.assert_array_equal(a["count"], b["count"])
            np.testing.assert_allclose(a["ns"], b["ns"], rtol=2.0 ** -(SAMPLE_BITS + 1), atol=0.5)
        assert (a["sketches"] is None) == (b["sketches"] is None), bid
        if b["sketches"] is not None:
            sa, sb = a["sketches"], b["sketches"]
            np.testing.assert_array_equal(np.isnan(sa[:, :, :QUANTILES]), np.isnan(sb[:, :, :QUANTILES]))
            np.testing.assert_allclose(sa[:, :, :QUANTILES], sb[:, :, :QUANTILES], rtol=2.0 ** -(QUANTILE_BITS + 1),
                                       atol=0.5)
            np.testing.assert_array_equal(np.nan_to_num(sa[:, :, COUNT]), np.nan_to_num(sb[:, :, COUNT]))
            np.testing.assert_allclose(np.nan_to_num(sa[:, :, TOTAL]), np.nan_to_num(sb[:, :, TOTAL]),
                                       rtol=2.0 ** -(SAMPLE_BITS + 1), atol=0.5)


def downgrade(engine, url: str, revision: str) -> None:
    """Alembic's downgrade of the store to ``revision``, in one transaction (as ``engine.upgrade`` upgrades)."""
    from alembic import command

    from kbase.store.engine import alembic_config

    cfg = alembic_config(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
