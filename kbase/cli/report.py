"""``kbase report``: the static HTML report (history trend, kernel pages, diff, leaderboard)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kbase.cli.shared import (
    DbOpt,
    FleetGpusOpt,
    GpuHourCostOpt,
    NameOpt,
    QuietOpt,
    RepoOpt,
    app,
    console,
    make_settings,
)


@app.command()
def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the report into.")] = Path("kbase-report"),
    name: NameOpt = None,
    branch: Annotated[str | None, typer.Option("--branch", help="Only baselines taken on this branch.")] = None,
    last: Annotated[int | None, typer.Option("--last", "-n", min=2, help="Only the newest N commits.")] = None,
    before: Annotated[str | None, typer.Option(
        "--before", help="The diff page's before side: a git revision, @ID, or a position in the history (-2: the "
        "one before last). Neither side given: the latest pair of commits whose gate shows a change.")] = None,
    after: Annotated[str | None, typer.Option(
        "--after", help="The diff page's after side: a git revision, @ID, or a position (-1: the newest).")] = None,
    step_pages: Annotated[int, typer.Option(
        "--step-pages", min=0, help="Diff pages of the largest detected steps (one per commit pair).")] = 10,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Write into a non-empty folder that does not hold a kbase report.")] = False,
    allow_incomparable: Annotated[bool, typer.Option(
        "--allow-incomparable", help="Judge the diff page's pair even if GPU/workload/window differ (as kbase gate "
        "--allow-incomparable).")] = False,
    history_ref: Annotated[str | None, typer.Option(
        "--history-ref", help="History noise of the diff page from this branch's first-parent line (as kbase "
        "gate --history-ref).")] = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    quiet: QuietOpt = False,
    gpu_hour_cost: GpuHourCostOpt = None,
    fleet_gpus: FleetGpusOpt = None,
    unit: Annotated[str | None, typer.Option(
        "--unit", help="run, window or iteration: the unit of the diff pages (as kbase diff --unit; default: "
        "chosen from the captures).")] = None,
) -> None:
    """A static HTML report of a workload's history (one folder, opens from disk, no network): the
    trend with the steps of kbase steps, a page per top kernel, the gate of a pair (by default the latest
    that shows a change; as kbase gate states it), a diff page per detected step and the newest leaderboard."""
    import kbase
    from kbase.render.report import build_report

    settings = make_settings(repo=repo, db=db, name=name, gpu_hour_cost=gpu_hour_cost, fleet_gpus=fleet_gpus,
                             policy={"unit": unit})
    data = kbase.report_data(settings, workload=name, branch=branch, last=last, before=before, after=after,
                             allow_incomparable=allow_incomparable, history_ref=history_ref, step_pages=step_pages)
    pages = build_report(data, out, overwrite=overwrite)
    if not quiet:
        from kbase.render.safe import inert

        console(stderr=True).print(f"wrote {len(pages)} page(s): open {inert(str(pages[0]))}", highlight=False,
                                   markup=False)
    else:
        print(pages[0])
