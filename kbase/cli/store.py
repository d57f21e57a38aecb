"""Store commands: snapshot, list, show, rm, history, db."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbase.cli.output import emit_leaderboard
from kbase.cli.shared import (
    CONTEXT,
    DbOpt,
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    NameOpt,
    QuietOpt,
    RepoOpt,
    WideOpt,
    app,
    check_choice,
    console,
    default_limit,
    make_settings,
    reading_progress,
    window_options,
)
from kbase.enums import HistoryFormat, LeaderboardFormat, ListFormat
from kbase.errors import InputError

if TYPE_CHECKING:
    from kbase.store.schema.records import BaselineRecord

db_app = typer.Typer(help="Store schema: upgrade, current revision.", no_args_is_help=True, context_settings=CONTEXT)
app.add_typer(db_app, name="db")


@app.command()
@window_options
def snapshot(
    profile: Annotated[Path | None, typer.Argument(help="Profile to store (default: [tool.kbase] profile).")] = None,
    name: NameOpt = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Free-form tag (repeatable).")] = None,
    note: Annotated[str, typer.Option("--note", help="Free-form note.")] = "",
    db: DbOpt = None,
    repo: RepoOpt = None,
    rev: Annotated[str | None, typer.Option(
        "--rev", help="Attribute the baseline to this revision instead of HEAD.")] = None,
    no_git: Annotated[bool, typer.Option(
        "--no-git", help="Profile made elsewhere: no repository; needs --rev FULLHASH.")] = False,
    branch: Annotated[str | None, typer.Option(
        "--branch", help="Record this branch (a CI checkout is detached: the pull request's branch).")] = None,
    require_clean: Annotated[bool, typer.Option("--require-clean", help="Refuse a dirty working tree.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Store again even if this file/window/commit is stored.")] = False,
    gpu_model: Annotated[str | None, typer.Option(
        "--gpu-model", help="The GPU model of a capture that does not name it (stored as 'unknown' otherwise, "
        "comparable with nothing); also [tool.kbase] gpu_model, KBASE_GPU_MODEL.")] = None,
    fmt: FormatOpt = "table",
    limit: LimitOpt = None,
    wide: WideOpt = False,
    full_names: FullNamesOpt = False,
    quiet: QuietOpt = False,
    window: dict[str, Any] | None = None,
) -> None:
    """Store a profile's leaderboard as a baseline at the current (or given) commit (--quiet: one line)."""
    import kbase

    fmt = check_choice(fmt, LeaderboardFormat)
    settings = make_settings(repo=repo, db=db, name=name, profile=profile, window=window, gpu_model=gpu_model)
    with reading_progress(settings.profile.name if settings.profile else "profile", quiet=quiet) as progress:
        res = kbase.snapshot(settings.profile, settings, tags=tag, note=note, rev=rev, no_git=no_git,
                             require_clean=require_clean, force=force, progress=progress, branch=branch)
    b = res.baseline
    where = f"{b.commit[:12]}" + (f" ({b.branch})" if b.branch else " (detached)" if b.detached else "")
    if res.created:
        line = (f"stored baseline @{b.id}: workload {b.workload}, commit {where}"
                + (", DIRTY working tree" if b.dirty else "") + f", window {b.window_desc}")
    else:
        line = f"already stored as @{b.id} (same file, window and commit; --force stores again)"
    if quiet and fmt == LeaderboardFormat.TABLE:  # the one line, on stdout
        console().print(line, highlight=False, markup=False, soft_wrap=True)
        return
    console(stderr=True).print(line, highlight=False, markup=False)
    emit_leaderboard(res.leaderboard, fmt, default_limit(fmt, limit, table_default=10), title=f"Baseline @{b.id}",
                     extra={"baseline_id": b.id, "commit": b.commit, "created": res.created}, wide=wide,
                     full_names=full_names)


@app.command("list")
def list_cmd(
    name: NameOpt = None,
    branch: Annotated[str | None, typer.Option("--branch", help="Only baselines taken on this branch.")] = None,
    commit: Annotated[str | None, typer.Option("--commit", help="Commit hash prefix.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (0: all).")] = 50,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Stored baselines, newest first, each commit with its subject and date (kernel time per iteration per
    GPU, as diff shows it); of --name (or [tool.kbase] name) when given, else of every workload."""
    import kbase
    from kbase import jsonable

    fmt = check_choice(fmt, ListFormat)
    settings = make_settings(repo=repo, db=db, name=name)
    rows = kbase.baselines(settings, branch=branch, commit=commit, limit=limit or None)
    if quiet and fmt != ListFormat.JSON:
        newest = f"; newest @{rows[0].id} at {rows[0].commit[:12]}" if rows else ""
        console().print(f"{len(rows)} baseline(s){newest}", highlight=False, markup=False)
        return
    from kbase.render import baselines as render

    if fmt == ListFormat.JSON:
        sys.stdout.write(jsonable.dumps(render.list_doc(rows, rows.commit_notes)) + "\n")
        return
    render.print_list(rows, rows.commit_notes, console(), wide=wide)


@app.command()
def show(
    ref: Annotated[str, typer.Argument(help="@ID or a git revision.")],
    name: NameOpt = None,
    fmt: FormatOpt = "table",
    limit: LimitOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    full_names: FullNamesOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """A stored leaderboard, rendered as by kbase top."""
    import kbase

    fmt = check_choice(fmt, LeaderboardFormat)
    settings = make_settings(repo=repo, db=db, name=name)
    stored = kbase.baseline(ref, settings)  # read without SQLAlchemy or pandas
    b = stored.baseline
    from kbase.render.baselines import baseline_dict

    emit_leaderboard(stored.leaderboard, fmt, default_limit(fmt, limit),
                     title=f"Baseline @{b.id} ({b.commit[:12]}, {b.workload})", extra={"baseline": baseline_dict(b)},
                     wide=wide, full_names=full_names, quiet=quiet)


@app.command()
def rm(
    ref: Annotated[str, typer.Argument(help="@ID of the baseline to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    name: NameOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Delete one baseline (asks first unless --yes)."""
    import kbase

    settings = make_settings(repo=repo, db=db, name=name)

    def confirm(b: BaselineRecord) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            raise InputError(f"refusing to delete @{b.id} without confirmation: pass --yes")
        return typer.confirm(f"Delete baseline @{b.id} ({b.workload} at {b.commit[:12]}, "
                             f"{b.created_at:%Y-%m-%d %H:%M})?", abort=True)

    from kbase.comparison.resolve import RefKind, parse_ref

    token = ref.removeprefix("@")
    if not (token.isascii() and token.isdigit()):
        raise InputError("expected a baseline id like @12", field="ref", value=ref)
    parsed = parse_ref("@" + token, profiles=False)  # (ids past 64 bits: no such baseline)
    assert parsed.kind == RefKind.BASELINE and parsed.baseline_id is not None
    b = kbase.remove(parsed.baseline_id, settings, confirm=confirm)
    if b is not None and not quiet:
        console(stderr=True).print(f"deleted baseline @{b.id}", highlight=False)


@app.command()
def history(
    kernel: Annotated[str, typer.Argument(help="Kernel: full or short name, #id (as tables show), family, "
                                               "substring, or /regex/; (step) or (idle): the GPU time budget's "
                                               "step time per iteration or idle per iteration per GPU.")],
    name: NameOpt = None,
    branch: Annotated[str | None, typer.Option("--branch", help="Only baselines taken on this branch.")] = None,
    all_workloads: Annotated[bool, typer.Option(
        "--all-workloads", help="Every workload's baselines (a sparkline each), not only --name's.")] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")] = "table",
    limit: LimitOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """One kernel across the stored baselines of a workload, oldest first: change vs the previous one, a sparkline,
    each commit's subject and date."""
    import kbase
    from kbase.render.formats import HISTORY, HistoryJob, Sink

    fmt = check_choice(fmt, HistoryFormat)
    settings = make_settings(repo=repo, db=db, name=name)
    h = kbase.history(kernel, settings, workload=name, branch=branch, all_workloads=all_workloads)
    quiet_table = quiet and fmt not in (HistoryFormat.JSON, HistoryFormat.CSV)
    found = None if quiet_table else kbase.history_steps(h)  # the one-line answer shows no steps
    job = HistoryJob(h, found, branch, default_limit(fmt, limit), wide=wide, quiet=quiet)
    HISTORY.render(fmt, job, Sink.stdout(console))


@db_app.command("upgrade")
def db_upgrade(db: DbOpt = None, repo: RepoOpt = None) -> None:
    """Upgrade the store's schema to this kbase's head (also done automatically on first use)."""
    from kbase.store.engine import open_store, schema_state

    settings = make_settings(repo=repo, db=db)
    with open_store(settings) as store:
        current, head, _ = schema_state(store.engine, store.url)
    print(f"store at revision {current} (head {head})")


@db_app.command("current")
def db_current(db: DbOpt = None, repo: RepoOpt = None) -> None:
    """Print the store's schema revision without changing anything."""
    from kbase.store.describe import describe_schema

    settings = make_settings(repo=repo, db=db)
    from kbase.render.safe import inert

    state = describe_schema(settings.store_url(), settings.busy_timeout_s, settings.connect_timeout_s)
    print(inert(state))  # the path is data: no escapes
