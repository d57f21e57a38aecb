"""Stage 4 — the baseline store: save a leaderboard with its commit, read baselines back.

Python API (the CLI is a thin shell over it)::

    from kbase import store
    engine, url = store.open_store()                      # resolves --db / KBASE_DB / default
    res = store.snapshot("train.sqlite", name="train-8gpu")  # read, window, leaderboard, save
    rows = store.list_baselines(engine, workload="train-8gpu")
    lb = store.load_leaderboard(engine, rows[0].id)       # the stored Leaderboard
    store.delete_baseline(engine, rows[0].id)

A baseline and all its rows are written in one transaction; any failure leaves the store as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kbase.store.engine import open_store, store_error  # noqa: F401 - re-exported API
from kbase.errors import InputError, KbaseError, StoreError
from kbase.store.models import Baseline, BaselineKernel, KernelName

DEFAULT_WORKLOAD = "default"
_NAME_CHUNK = 400


def name_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


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
            h.update(block)
    return h.hexdigest()


def fingerprint(gpu_models: str, gpu_count: int, workload: str, window_spec: str) -> str:
    """Comparability key: two baselines compare only when this matches."""
    return hashlib.sha256(f"{gpu_models}|{gpu_count}|{workload}|{window_spec}".encode()).hexdigest()[:32]


@contextlib.contextmanager
def write_transaction(engine, url: str = ""):
    """One transaction that takes SQLite's write lock up front (BEGIN IMMEDIATE), so concurrent
    writers queue on the busy timeout instead of failing on a read→write lock upgrade."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.exec_driver_sql("ROLLBACK")
                    raise
                conn.exec_driver_sql("COMMIT")
            else:
                with conn.begin():
                    yield conn
    except SQLAlchemyError as exc:
        raise store_error(url or str(engine.url), exc) from None


def _pack(values: np.ndarray) -> bytes:
    return np.asarray(values, dtype="<f4").tobytes()


def unpack(blob: bytes | None) -> np.ndarray:
    if not blob:
        return np.empty(0, dtype=np.float32)
    return np.frombuffer(blob, dtype="<f4")


def _name_ids(conn, table: pd.DataFrame) -> dict[str, int]:
    """Ids of the kernel names, inserting those not yet known (race-safe upsert)."""
    from sqlalchemy import select

    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    kn = KernelName.__table__
    u = table[["name", "family", "short_name", "category", "tc"]].drop_duplicates("name")
    rows = [  # column lists: itertuples over Arrow-backed string columns is several times slower
        {
            "name_hash": name_hash(name),
            "name": name,
            "family_hash": name_hash(family),
            "family": family,
            "short_name": short,
            "category": category,
            "tc": tc,
        }
        for name, family, short, category, tc in zip(*(u[c].tolist() for c in u.columns))
    ]
    # One global insert order: two writers adding overlapping new names in different (leaderboard)
    # orders would each wait on the other's uncommitted row — a deadlock on PostgreSQL.
    rows.sort(key=lambda row: row["name_hash"])
    ids: dict[str, int] = {}
    by_hash = {row["name_hash"]: row["name"] for row in rows}
    for i in range(0, len(rows), _NAME_CHUNK):
        chunk = rows[i : i + _NAME_CHUNK]
        hashes = [row["name_hash"] for row in chunk]
        # Known names are only looked up: the insert (and its per-row parameter processing) is paid
        # for new names only, which after the first baseline of a workload is almost none.
        found = dict(conn.execute(select(kn.c.name_hash, kn.c.id).where(kn.c.name_hash.in_(hashes))).all())
        missing = [row for row in chunk if row["name_hash"] not in found]
        if missing:
            conn.execute(insert(kn).on_conflict_do_nothing(index_elements=["name_hash"]), missing)
            new = [row["name_hash"] for row in missing]
            found.update(conn.execute(select(kn.c.name_hash, kn.c.id).where(kn.c.name_hash.in_(new))).all())
        for h, nid in found.items():
            ids[by_hash[h]] = nid
    return ids


def _sample_matrices(s: pd.DataFrame, keys: list[int]) -> tuple[list, np.ndarray, np.ndarray]:
    """Per-iteration samples as two (names x keys) float64 matrices: ns and launches.

    Vectorised (one factorize, one fancy assignment): a Python loop over a groupby cost ~1 s per
    snapshot at 2,000 kernels x 100 iterations. Duplicate (name, iteration) rows: the last wins.
    """
    codes, names = pd.factorize(s["name"], sort=False)
    keep = codes >= 0  # a missing name forms no group (as groupby drops it)
    codes = codes[keep]
    it = s["iteration"].to_numpy()[keep].astype(np.int64)
    karr = np.asarray(keys, dtype=np.int64)
    if len(np.unique(karr)) == len(karr):
        order = np.argsort(karr, kind="stable")
        idx = np.searchsorted(karr, it, sorter=order)
        idx = order[np.minimum(idx, len(karr) - 1)]
        bad = karr[idx] != it
        if bad.any():
            raise KeyError(int(it[np.flatnonzero(bad)[0]]))
    else:  # repeated keys (never written by kbase): the last position of each, as a dict would give
        pos = {k: i for i, k in enumerate(keys)}
        idx = np.array([pos[int(k)] for k in it], dtype=np.int64)
    ns = np.zeros((len(names), len(keys)), dtype=np.float64)
    cnt = np.zeros((len(names), len(keys)), dtype=np.float64)
    ns[codes, idx] = s["total_ns"].to_numpy()[keep]
    cnt[codes, idx] = s["count"].to_numpy()[keep]
    return list(names), ns, cnt


def _kernel_rows(baseline_id: int, lb, name_ids: dict[str, int], keys: list[int]) -> list[dict]:
    t = lb.table
    s = lb.samples
    packed: dict[str, tuple[bytes, bytes]] = {}
    if keys and len(s):
        names, ns, cnt = _sample_matrices(s, keys)
        ns32, cnt32 = ns.astype("<f4"), cnt.astype("<f4")
        packed = {name: (ns32[i].tobytes(), cnt32[i].tobytes()) for i, name in enumerate(names)}
    empty = _pack(np.zeros(len(keys))) if keys else None
    rows = []
    nan = float("nan")
    isna = pd.isna
    # column lists, not itertuples: Arrow-backed string columns make itertuples several times slower
    for rank, (name, gpus, count, total, avg, median, lo, hi, std, per_iter, cpi, share_w, share_k, amdahl,
               frag) in enumerate(zip(*(t[c].tolist() for c in _ROW_COLS)), 1):
        samples = packed.get(name)
        rows.append(
            {
                "baseline_id": baseline_id,
                "name_id": name_ids[name],
                "rank": rank,
                "gpus": int(gpus),
                "count": int(count),
                "total_ns": int(total),
                "avg_ns": float(avg),
                "median_ns": float(median),
                "min_ns": int(lo),
                "max_ns": int(hi),
                "std_ns": float(std),
                "per_iter_ns": None if isna(per_iter) else float(per_iter),
                "count_per_iter": None if isna(cpi) else float(cpi),
                "share_window": None if isna(share_w) else float(share_w),
                "share_kernel": None if isna(share_k) else float(share_k),
                "amdahl_ceiling": None if amdahl in (nan, float("inf")) else float(amdahl),
                "fragmented": bool(frag),
                "iter_ns": samples[0] if samples is not None else empty,
                "iter_count": samples[1] if samples is not None else empty,
            }
        )
    return rows


_ROW_COLS = ("name", "gpus", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns", "std_ns", "per_iter_ns",
             "count_per_iter", "share_window", "share_kernel", "amdahl_ceiling", "fragmented")


def insert_kernels(conn, rows: list[dict], chunk: int = 2000) -> None:
    bk = BaselineKernel.__table__
    for i in range(0, len(rows), chunk):
        conn.execute(bk.insert(), rows[i : i + chunk])


@dataclass
class SourceInfo:
    name: str
    sha256: str
    size: int
    format: str


def describe_source(path: Path, fmt: str) -> SourceInfo:
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file()) if path.is_dir() else path.stat().st_size
    return SourceInfo(name=path.name, sha256=file_sha256(path), size=size, format=fmt)


def save_leaderboard(engine, lb, *, workload: str, commit, source: SourceInfo, window_spec: str,
                     tags: list[str] | None = None, note: str = "", url: str = "") -> Baseline:
    """Store one leaderboard as a new baseline, atomically. Returns the saved Baseline row."""
    from kbase import __version__

    s = lb.summary
    models = ",".join(s["gpu_models"])
    keys = [int(k) for k in s["iteration_keys"]]
    base = Baseline(
        workload=workload,
        commit=commit.hash,
        commit_date=commit.date,
        branch=commit.branch,
        detached=commit.detached,
        dirty=commit.dirty,
        source_name=source.name,
        source_sha256=source.sha256,
        source_size=source.size,
        source_format=source.format,
        exporter_version=s["exporter"],
        gpu_models=models,
        gpu_count=int(s["gpus"]),
        host=socket.gethostname(),
        window_spec=window_spec,
        window_desc=s["window"],
        marker=s["marker"] or "",
        aligned=bool(s["aligned"]),
        warmup_skipped=int(s["warmup_skipped"]),
        iterations_used=int(s["iterations"]),
        iteration_keys=json.dumps(keys),
        window_ns=int(s["window_ns"]),
        window_gpu_ns=int(s["window_gpu_ns"]),
        total_kernel_ns=int(s["total_kernel_ns"]),
        compute_ns=int(s["compute_ns"]),
        communication_ns=int(s["communication_ns"]),
        memory_ns=int(s["memory_ns"]),
        step_wall_ns=s.get("step_wall_ns"),
        fingerprint=fingerprint(models, int(s["gpus"]), workload, window_spec),
        summary_json=json.dumps({**s, "notes": lb.notes}, default=str),
        kbase_version=__version__,
        tags=json.dumps(sorted(set(tags or []))),
        note=note,
    )
    bt = Baseline.__table__
    values = base.model_dump(exclude={"id"})
    with write_transaction(engine, url) as conn:
        baseline_id = conn.execute(bt.insert().values(**values).returning(bt.c.id)).scalar_one()
        name_ids = _name_ids(conn, lb.table)
        insert_kernels(conn, _kernel_rows(baseline_id, lb, name_ids, keys))
    base.id = baseline_id
    return base


def find_duplicate(engine, workload: str, commit: str, sha256: str, window_spec: str) -> Baseline | None:
    from sqlmodel import Session, select

    with Session(engine) as session:
        q = select(Baseline).where(
            Baseline.workload == workload,
            Baseline.commit == commit,
            Baseline.source_sha256 == sha256,
            Baseline.window_spec == window_spec,
        )
        return session.exec(q).first()


def list_baselines(engine, workload: str | None = None, branch: str | None = None,
                   commit_prefix: str | None = None, limit: int | None = None) -> list[Baseline]:
    """Baselines, newest first, optionally filtered."""
    from sqlmodel import Session, select

    q = select(Baseline)
    if workload:
        q = q.where(Baseline.workload == workload)
    if branch:
        q = q.where(Baseline.branch == branch)
    if commit_prefix:
        q = q.where(Baseline.commit.startswith(commit_prefix.lower(), autoescape=True))
    q = q.order_by(Baseline.created_at.desc(), Baseline.id.desc())
    if limit:
        q = q.limit(limit)
    with Session(engine) as session:
        return list(session.exec(q).all())


def get_baseline(engine, baseline_id: int) -> Baseline:
    from sqlmodel import Session

    with Session(engine) as session:
        b = session.get(Baseline, baseline_id)
    if b is None:
        raise InputError(f"baseline @{baseline_id}: no such baseline in the store")
    return b


def baselines_at(engine, workload: str, commits: list[str]) -> dict[str, list[Baseline]]:
    """Baselines of ``workload`` at each of ``commits`` (full hashes), oldest first per commit."""
    from sqlmodel import Session, select

    out: dict[str, list[Baseline]] = {}
    if not commits:
        return out
    with Session(engine) as session:
        q = select(Baseline).where(Baseline.workload == workload, Baseline.commit.in_(commits)).order_by(Baseline.id)
        for b in session.exec(q).all():
            out.setdefault(b.commit, []).append(b)
    return out


def load_kernels(engine, baseline_ids: list[int]) -> pd.DataFrame:
    """Kernel rows of the given baselines joined with their names (one query)."""
    from sqlalchemy import select

    bk = BaselineKernel.__table__
    kn = KernelName.__table__
    q = (
        select(bk, kn.c.name, kn.c.family, kn.c.short_name, kn.c.category, kn.c.tc)
        .join(kn, kn.c.id == bk.c.name_id)
        .where(bk.c.baseline_id.in_(baseline_ids))
        .order_by(bk.c.baseline_id, bk.c.rank)
    )
    with engine.connect() as conn:
        res = conn.execute(q)
        # plain tuples: pandas probes each Row object for ``_fields`` etc. (~2x slower)
        return pd.DataFrame([tuple(r) for r in res.fetchall()], columns=list(res.keys()))


def load_leaderboard(engine, baseline_id: int):
    """The stored Leaderboard of a baseline, as ``build_leaderboard`` made it."""
    from kbase.analysis.leaderboard import COLUMNS, Leaderboard

    b = get_baseline(engine, baseline_id)
    k = load_kernels(engine, [baseline_id])
    summary = json.loads(b.summary_json)
    notes = summary.pop("notes", [])
    table = k.assign(
        amdahl_ceiling=k["amdahl_ceiling"].fillna(float("inf")),
        per_iter_ns=k["per_iter_ns"].astype(float),
        count_per_iter=k["count_per_iter"].astype(float),
    )[COLUMNS].reset_index(drop=True)
    keys = json.loads(b.iteration_keys)
    return Leaderboard(table=table, summary=summary, samples=_unpack_samples(k, keys), notes=notes)


def _unpack_samples(k: pd.DataFrame, keys: list[int]) -> pd.DataFrame:
    """(name, iteration, count, total_ns) for every stored iteration with launches, in row then key
    order. One np.frombuffer per row, no per-sample Python (was ~0.3 s at 2,000 x 100)."""
    cols = ["name", "iteration", "count", "total_ns"]
    karr = np.asarray(keys, dtype=np.int64)
    ns_blobs, cnt_blobs = k["iter_ns"].tolist(), k["iter_count"].tolist()
    width = len(ns_blobs[0]) if ns_blobs and isinstance(ns_blobs[0], bytes) else -1
    if width > 0 and all(isinstance(b, bytes) and len(b) == width for b in (*ns_blobs, *cnt_blobs)):
        # every row holds the same number of iterations (what save_leaderboard writes): one matrix
        m = min(width // 4, len(karr))
        ns = np.frombuffer(b"".join(ns_blobs), dtype="<f4").reshape(len(ns_blobs), -1)[:, :m]
        cnt = np.frombuffer(b"".join(cnt_blobs), dtype="<f4").reshape(len(cnt_blobs), -1)[:, :m]
        row, col = np.nonzero(cnt > 0)  # row-major: row then key order, as the loop below
        if not len(row):
            return pd.DataFrame([], columns=cols)
        return pd.DataFrame({
            "name": np.asarray(k["name"].tolist(), dtype=object)[row],
            "iteration": karr[col],
            "count": cnt[row, col].astype(np.int64),
            "total_ns": ns[row, col].astype(np.float64),
        }, columns=cols)
    pos, cnts, nss, lens = [], [], [], []
    for ns_blob, cnt_blob in zip(ns_blobs, cnt_blobs):
        ns, cnt = unpack(ns_blob), unpack(cnt_blob)
        m = min(len(ns), len(karr))
        if len(cnt) < m:
            raise IndexError(f"stored launch counts cover {len(cnt)} iterations, times cover {m}")
        sel = np.flatnonzero(cnt[:m] > 0)
        pos.append(sel)
        cnts.append(cnt[sel])
        nss.append(ns[sel])
        lens.append(len(sel))
    total = sum(lens)
    if not total:
        return pd.DataFrame([], columns=cols)
    return pd.DataFrame({
        "name": np.repeat(np.asarray(k["name"].tolist(), dtype=object), lens),
        "iteration": karr[np.concatenate(pos)],
        "count": np.concatenate(cnts).astype(np.int64),
        "total_ns": np.concatenate(nss).astype(np.float64),
    }, columns=cols)


def delete_baseline(engine, baseline_id: int, url: str = "") -> None:
    from sqlalchemy import delete

    get_baseline(engine, baseline_id)
    with write_transaction(engine, url) as conn:
        conn.execute(delete(BaselineKernel.__table__).where(BaselineKernel.__table__.c.baseline_id == baseline_id))
        conn.execute(delete(Baseline.__table__).where(Baseline.__table__.c.id == baseline_id))


def kernel_history(engine, name: str, workload: str | None = None) -> pd.DataFrame:
    """One kernel across all baselines (oldest first): commit, date, per-iteration time, count."""
    from sqlalchemy import select

    bk = BaselineKernel.__table__
    kn = KernelName.__table__
    bt = Baseline.__table__
    q = (
        select(bt.c.id, bt.c.commit, bt.c.created_at, bt.c.workload, bk.c.count, bk.c.total_ns,
               bk.c.avg_ns, bk.c.per_iter_ns, bk.c.share_window)
        .join(bk, bk.c.baseline_id == bt.c.id)
        .join(kn, kn.c.id == bk.c.name_id)
        .where(kn.c.name_hash == name_hash(name))
        .order_by(bt.c.created_at, bt.c.id)
    )
    if workload:
        q = q.where(bt.c.workload == workload)
    with engine.connect() as conn:
        res = conn.execute(q)
        # plain tuples: pandas probes each Row object (~2x slower at 10,000 baselines)
        return pd.DataFrame([tuple(r) for r in res.fetchall()], columns=list(res.keys()))


@dataclass
class SnapshotResult:
    baseline: Baseline
    leaderboard: object
    created: bool  # False: an identical baseline already existed (idempotent)


def snapshot(profile_path: Path | str, spec=None, *, name: str | None = None, tags: list[str] | None = None,
             note: str = "", db: str | None = None, repo: Path | None = None, rev: str | None = None,
             no_git: bool = False, require_clean: bool = False, force: bool = False,
             engine=None, url: str = "", reader=None) -> SnapshotResult:
    """Read a profile, build its leaderboard on the window, and store it at the commit."""
    from kbase.gitrepo import commit_info
    from kbase.analysis.leaderboard import build_leaderboard
    from kbase.readers import detect_format, read_profile
    from kbase.analysis.window import WindowSpec, select_window

    path = Path(profile_path)
    spec = spec or WindowSpec()
    workload = name or DEFAULT_WORKLOAD
    commit = commit_info(repo, rev, no_git)
    if require_clean and commit.dirty:
        raise InputError("working tree has uncommitted changes and --require-clean was given")
    fmt = detect_format(path)
    own_engine = engine is None  # opened here: disposed here (no pooled connections left behind)
    if own_engine:
        engine, url = open_store(db, repo)
    try:
        source = describe_source(path, fmt)
        wkey = spec.key()
        if not force:
            dup = find_duplicate(engine, workload, commit.hash, source.sha256, wkey)
            if dup is not None:
                return SnapshotResult(baseline=dup, leaderboard=load_leaderboard(engine, dup.id), created=False)
        profile = (reader or read_profile)(path)
        lb = build_leaderboard(select_window(profile, spec))
        try:
            base = save_leaderboard(engine, lb, workload=workload, commit=commit, source=source,
                                    window_spec=wkey, tags=tags, note=note, url=url)
        except KbaseError:
            raise
        except Exception as exc:  # noqa: BLE001 - driver errors become one line; the transaction rolled back
            raise StoreError(f"store: could not save the baseline ({type(exc).__name__}: {exc})") from None
        return SnapshotResult(baseline=base, leaderboard=lb, created=True)
    finally:
        if own_engine:
            engine.dispose()
