"""Baselines that travel and are cleaned up: export, import, prune."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kbase.cli.shared import DbOpt, NameOpt, QuietOpt, RepoOpt, WideOpt, app, check_choice, console, make_settings
from kbase.enums import ListFormat


@app.command()
def prune(
    keep_branch: Annotated[list[str] | None, typer.Option(
        "--keep-branch", help="A branch whose history is kept (repeatable; local, else origin/NAME).")] = None,
    older_than: Annotated[str | None, typer.Option(
        "--older-than", help="Only baselines stored longer ago than this (30d, 12h, 2w).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete (without it: a dry-run listing).")] = False,
    export: Annotated[Path | None, typer.Option(
        "--export", help="The export folder the baselines travel in: remove the deleted ones' files there and "
        "write a tombstone for each, so the deletion travels too.")] = None,
    kind: Annotated[str | None, typer.Option(
        "--kind", help="Only baselines of this kind: snapshot, or bisect (midpoints kbase bisect stored; a kept "
        "branch's history does not keep them).")] = None,
    name: NameOpt = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Delete baselines nobody needs (pull-request runs, old branches): a dry-run listing of every baseline, kept or
    not and why, unless --yes. Never deletes one in a --keep-branch's history, stored on such a branch, needed by
    an acceptance (its commit and the base before it), or newer than --older-than. Of --name's workload when
    given, else of every workload."""
    import kbase
    from kbase import jsonable
    from kbase.render import housekeeping as render

    fmt = check_choice(fmt, ListFormat)
    settings = make_settings(repo=repo, db=db, name=name)
    result = kbase.prune(settings, keep_branches=list(keep_branch or []), older_than=older_than, workload=name,
                         yes=yes, export_dir=export, kind=kind)
    if fmt == ListFormat.JSON:
        sys.stdout.write(jsonable.dumps(render.prune_doc(result)) + "\n")
        return
    render.print_prune(result, console(), quiet=quiet, wide=wide)


@app.command()
def export(
    folder: Annotated[Path, typer.Argument(help="Folder to write (created if missing): a data branch's, say.")],
    name: NameOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write each stored baseline and acceptance the folder lacks as one file, named by the hash of its bytes
    (docs/export-format.md): two CI runners exporting into one git branch never write the same file. Of --name's
    workload when given, else of every workload."""
    import kbase
    from kbase.render import housekeeping as render

    settings = make_settings(repo=repo, db=db, name=name)
    result = kbase.export_baselines(folder, settings, workload=name)
    if not quiet:
        console(stderr=True).print(render.export_summary(result), highlight=False, markup=False, soft_wrap=True)


@app.command("import")
def import_cmd(
    folder: Annotated[Path, typer.Argument(help="An export folder (kbase export).")],
    keep_branch: Annotated[list[str] | None, typer.Option(
        "--keep-branch", help="A branch whose baselines no tombstone deletes, as prune keeps them (repeatable; "
        "default: the repository's default branch).")] = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Merge an export folder into the store: each baseline once, deletions (tombstones) applied, acceptances
    added. Every file is checked first; a bad file, or two contents under one capture key, is exit 2 naming
    them, with the store unchanged."""
    import kbase
    from kbase.render import housekeeping as render

    settings = make_settings(repo=repo, db=db)
    result = kbase.import_baselines(folder, settings, keep_branches=list(keep_branch or []) or None)
    err = console(stderr=True)
    for line in render.refused_tombstone_lines(result):  # even with --quiet: a deletion was refused
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    if not quiet:
        err.print(render.import_summary(result), highlight=False, markup=False, soft_wrap=True)
