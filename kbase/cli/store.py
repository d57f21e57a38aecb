"""Store commands: snapshot, list, show, rm, history, db."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kbase.cli.app import (
    DbOpt, FormatOpt, GpuOpt, IterationsOpt, IterKernelOpt, LimitOpt, MarkerOpt, NameOpt, RepoOpt,
    TrimOpt, WarmupOpt, app, console, default_limit, read_with_progress, window_spec,
)
from kbase.errors import InputError

db_app = typer.Typer(help="Store schema: upgrade, current revision.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _settings(repo: Path | None) -> dict:
    from kbase.settings import find_project_root, load_tool_config

    return load_tool_config(find_project_root(repo))


@app.command()
def snapshot(
    profile: Annotated[Optional[Path], typer.Argument(help="Profile to store (default: [tool.kbase] profile).")] = None,
    marker: MarkerOpt = None,
    iteration_kernel: IterKernelOpt = None,
    iterations: IterationsOpt = None,
    warmup: WarmupOpt = None,
    trim: TrimOpt = None,
    gpu: GpuOpt = None,
    name: NameOpt = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", help="Free-form tag (repeatable).")] = None,
    note: Annotated[str, typer.Option("--note", help="Free-form note.")] = "",
    db: DbOpt = None,
    repo: RepoOpt = None,
    rev: Annotated[Optional[str], typer.Option("--rev", help="Attribute the baseline to this revision instead of HEAD.")] = None,
    no_git: Annotated[bool, typer.Option("--no-git", help="Profile made elsewhere: no repository; needs --rev FULLHASH.")] = False,
    require_clean: Annotated[bool, typer.Option("--require-clean", help="Refuse a dirty working tree.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Store again even if this file/window/commit is stored.")] = False,
    fmt: FormatOpt = "table",
    limit: LimitOpt = None,
) -> None:
    """Store a profile's leaderboard as a baseline at the current (or given) commit."""
    from kbase import store
    from kbase.cli import emit_leaderboard
    from kbase.render.leaderboard import check_format

    check_format(fmt)
    cfg = _settings(repo)
    if profile is None:
        if not cfg.get("profile"):
            raise InputError("no PROFILE given and no [tool.kbase] profile in pyproject.toml")
        from kbase.settings import find_project_root

        profile = find_project_root(repo) / cfg["profile"]
    spec = window_spec(
        marker if marker is not None else cfg.get("marker"),
        iteration_kernel if iteration_kernel is not None else cfg.get("iteration_kernel"),
        iterations if iterations is not None else cfg.get("iterations"),
        warmup if warmup is not None else cfg.get("warmup"),
        trim if trim else cfg.get("trim"),
        gpu if gpu is not None else cfg.get("gpu"),
    )
    engine, url = store.open_store(db, repo)
    res = store.snapshot(profile, spec, name=name or cfg.get("name"), tags=tag, note=note, repo=repo, rev=rev,
                         no_git=no_git, require_clean=require_clean, force=force, engine=engine, url=url,
                         reader=read_with_progress)
    b = res.baseline
    err = console(stderr=True)
    where = f"{b.commit[:12]}" + (f" ({b.branch})" if b.branch else " (detached)" if b.detached else "")
    if res.created:
        err.print(f"stored baseline @{b.id}: workload {b.workload}, commit {where}"
                  + (", DIRTY working tree" if b.dirty else "") + f", window {b.window_desc}", highlight=False, markup=False)
    else:
        err.print(f"already stored as @{b.id} (same file, window and commit; --force stores again)", highlight=False, markup=False)
    emit_leaderboard(res.leaderboard, fmt, default_limit(fmt, limit if limit is not None else (10 if fmt == "table" else None)),
                     title=f"Baseline @{b.id}", extra={"baseline_id": b.id, "commit": b.commit, "created": res.created})


def _baseline_dict(b) -> dict:
    return {
        "id": b.id, "created_at": b.created_at.isoformat() if b.created_at else None, "workload": b.workload,
        "commit": b.commit, "commit_date": b.commit_date.isoformat() if b.commit_date else None,
        "branch": b.branch, "detached": b.detached, "dirty": b.dirty, "source": b.source_name,
        "sha256": b.source_sha256, "format": b.source_format, "gpu_models": b.gpu_models, "gpus": b.gpu_count,
        "window": b.window_desc, "aligned": b.aligned, "iterations": b.iterations_used,
        "total_kernel_ns": b.total_kernel_ns, "window_gpu_ns": b.window_gpu_ns, "tags": json.loads(b.tags),
        "note": b.note, "kbase_version": b.kbase_version,
    }


@app.command("list")
def list_cmd(
    name: NameOpt = None,
    branch: Annotated[Optional[str], typer.Option("--branch")] = None,
    commit: Annotated[Optional[str], typer.Option("--commit", help="Commit hash prefix.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (0: all).")] = 50,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """Stored baselines, newest first."""
    from kbase import store
    from kbase.render.leaderboard import fmt_ns

    if fmt not in ("table", "json"):
        raise InputError(f"--format {fmt!r}: kbase list writes table or json")
    engine, _ = store.open_store(db, repo)
    rows = store.list_baselines(engine, workload=name, branch=branch, commit_prefix=commit, limit=limit or None)
    if fmt == "json":
        sys.stdout.write(json.dumps({"schema": "kbase.list/1", "baselines": [_baseline_dict(b) for b in rows]}, indent=2) + "\n")
        return
    from rich.table import Table

    t = Table(title=f"{len(rows)} baseline(s)")
    for h in ("id", "created (UTC)", "workload", "commit", "branch", "GPUs", "window", "kernel time", "tags"):
        t.add_column(h)
    for b in rows:
        t.add_row(f"@{b.id}", b.created_at.strftime("%Y-%m-%d %H:%M"), b.workload,
                  b.commit[:12] + ("+dirty" if b.dirty else ""), b.branch or "(detached)",
                  f"{b.gpu_count}x {b.gpu_models}", ("" if b.aligned else "NOT aligned: ") + b.window_desc,
                  fmt_ns(b.total_kernel_ns), ",".join(json.loads(b.tags)))
    console().print(t)


def resolve_one(engine, ref: str, workload: str | None, repo: Path | None):
    """A single baseline from ``@ID``/``ID`` or a git revision (newest baseline at that commit)."""
    from kbase import store

    token = ref[1:] if ref.startswith("@") else ref
    if token.isdigit() and (ref.startswith("@") or len(token) < 7):
        return store.get_baseline(engine, int(token))
    from kbase.gitrepo import open_repo, resolve_commit

    commit = resolve_commit(open_repo(repo), ref).hexsha
    found = store.baselines_at(engine, workload or store.DEFAULT_WORKLOAD, [commit]).get(commit)
    if not found:
        raise InputError(f"no baseline of workload {workload or store.DEFAULT_WORKLOAD!r} at {ref} ({commit[:12]})")
    return found[-1]


@app.command()
def show(
    ref: Annotated[str, typer.Argument(help="@ID or a git revision.")],
    name: NameOpt = None,
    fmt: FormatOpt = "table",
    limit: LimitOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """A stored leaderboard, rendered as by kbase top."""
    from kbase import store
    from kbase.cli import emit_leaderboard
    from kbase.render.leaderboard import check_format

    check_format(fmt)
    engine, _ = store.open_store(db, repo)
    b = resolve_one(engine, ref, name, repo)
    lb = store.load_leaderboard(engine, b.id)
    emit_leaderboard(lb, fmt, default_limit(fmt, limit), title=f"Baseline @{b.id} ({b.commit[:12]}, {b.workload})",
                     extra={"baseline": _baseline_dict(b)})


@app.command()
def rm(
    baseline_id: Annotated[str, typer.Argument(help="@ID of the baseline to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """Delete one baseline (asks first unless --yes)."""
    from kbase import store

    token = baseline_id.lstrip("@")
    if not token.isdigit():
        raise InputError(f"{baseline_id!r}: expected a baseline id like @12")
    engine, url = store.open_store(db, repo)
    b = store.get_baseline(engine, int(token))
    if not yes:
        if not sys.stdin.isatty():
            raise InputError(f"refusing to delete @{b.id} without confirmation: pass --yes")
        typer.confirm(f"Delete baseline @{b.id} ({b.workload} at {b.commit[:12]}, {b.created_at:%Y-%m-%d %H:%M})?", abort=True)
    store.delete_baseline(engine, b.id, url)
    console(stderr=True).print(f"deleted baseline @{b.id}", highlight=False)


@app.command()
def history(
    kernel: Annotated[str, typer.Argument(help="Full demangled kernel name.")],
    name: NameOpt = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")] = "table",
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """One kernel across every stored baseline, oldest first."""
    from kbase import store
    from kbase.render.leaderboard import fmt_ns

    engine, _ = store.open_store(db, repo)
    h = store.kernel_history(engine, kernel, name)
    if fmt == "json":
        sys.stdout.write(h.to_json(orient="records", date_format="iso", indent=2) + "\n")
    elif fmt == "csv":
        sys.stdout.write(h.to_csv(index=False))
    elif fmt == "table":
        from rich.table import Table

        t = Table(title=f"{len(h)} baseline(s) with this kernel")
        for c in ("id", "commit", "created", "count", "avg", "per iter/GPU"):
            t.add_column(c)
        for r in h.itertuples():
            t.add_row(f"@{r.id}", r.commit[:12], str(r.created_at)[:16], str(r.count), fmt_ns(r.avg_ns), fmt_ns(r.per_iter_ns))
        console().print(t)
    else:
        raise InputError(f"--format {fmt!r}: kbase history writes table, json or csv")


@db_app.command("upgrade")
def db_upgrade(db: DbOpt = None, repo: RepoOpt = None) -> None:
    """Upgrade the store's schema to this kbase's head (also done automatically on first use)."""
    from kbase.store.engine import open_store, schema_state

    engine, url = open_store(db, repo)
    current, head, _ = schema_state(engine, url)
    print(f"store at revision {current} (head {head})")


@db_app.command("current")
def db_current(db: DbOpt = None, repo: RepoOpt = None) -> None:
    """Print the store's schema revision without changing anything."""
    from kbase.store.engine import alembic_config, make_engine, mask_url, resolve_url, schema_state, sqlite_path, store_error

    url = resolve_url(db, repo)
    path = sqlite_path(url)
    if path is not None and not path.exists():  # opening it would create the file (and its folder)
        from alembic.script import ScriptDirectory

        head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
        print(f"{mask_url(url)}: revision (empty), head {head}: needs upgrade (no store yet; created on first use)")
        return
    engine = make_engine(url)
    try:
        current, head, known = schema_state(engine, url)
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None
    state = "up to date" if current == head else ("NEWER than this kbase" if current and current not in known else "needs upgrade")
    print(f"{mask_url(url)}: revision {current or '(empty)'}, head {head}: {state}")
