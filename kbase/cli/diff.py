"""Diff and gate commands: diff, gate, accept."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbase.cli.diff_run import run_diff, run_gate
from kbase.cli.shared import (
    DbOpt,
    FleetGpusOpt,
    FullNamesOpt,
    GpuHourCostOpt,
    NameOpt,
    QuietOpt,
    RepoOpt,
    WideOpt,
    app,
    check_choice,
    console,
    make_settings,
    window_options,
)
from kbase.enums import ListFormat
from kbase.errors import InputError, SettingsError

if TYPE_CHECKING:
    from kbase.store.schema.records import AcceptanceRecord

AllOpt = Annotated[bool, typer.Option("--all", help="Also list unchanged and within-noise kernels.")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Error when a revision has no baseline of its own.")]
BaseRefOpt = Annotated[str | None, typer.Option(
    "--base-ref", help="Compare against the merge-base with this ref (pull requests).")]
HistoryRefOpt = Annotated[str | None, typer.Option(
    "--history-ref", help="History noise from this branch's first-parent line (default: --base-ref, else "
    "[tool.kbase.gate] history_ref, else the before side's line).")]
DiffFormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json, md, csv, bmf or github-benchmark.")]
UnitOpt = Annotated[str | None, typer.Option(
    "--unit", help="run, window or iteration: what one compared unit is (default: chosen from the captures; "
    "docs/diff.md).")]
ByOpt = Annotated[str, typer.Option(
    "--by", help="kernel or op: the table (and Markdown, CSV) by the op that launched each kernel, each op's changed "
    "kernels below it (JSON always carries both: its ops list).")]


@app.command()
@window_options
def diff(
    a: Annotated[str, typer.Argument(help="Before: git revision, @ID, or a profile file.")],
    b: Annotated[str | None, typer.Argument(help="After (default: HEAD's baseline).")] = None,
    name: NameOpt = None,
    base_ref: BaseRefOpt = None,
    strict: StrictOpt = False,
    history_ref: HistoryRefOpt = None,
    fmt: DiffFormatOpt = "table",
    show_all: AllOpt = False,
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    full_names: FullNamesOpt = False,
    quiet: QuietOpt = False,
    gpu_hour_cost: GpuHourCostOpt = None,
    fleet_gpus: FleetGpusOpt = None,
    by: ByOpt = "kernel",
    unit: UnitOpt = None,
    window: dict[str, Any] | None = None,
) -> None:
    """Which kernels grew, shrank, appeared or vanished between two baselines (per iteration), and with a
    price per GPU-hour and the fleet's GPUs, what the change costs per month."""
    run_diff(
        a, b, name=name, base_ref=base_ref, strict=strict, history_ref=history_ref, fmt=fmt, show_all=show_all, db=db,
        repo=repo, wide=wide, full_names=full_names, quiet=quiet, gpu_hour_cost=gpu_hour_cost, fleet_gpus=fleet_gpus,
        by=by, unit=unit, window=window)


@app.command()
@window_options
def gate(
    a: Annotated[str | None, typer.Argument(
        help="Before (default HEAD~1, or the merge-base with --base-ref).")] = None,
    b: Annotated[str | None, typer.Argument(help="After (default HEAD).")] = None,
    name: NameOpt = None,
    base_ref: BaseRefOpt = None,
    strict: StrictOpt = False,
    warn_only: Annotated[bool, typer.Option("--warn-only", help="Report regressions but exit 0.")] = False,
    allow_incomparable: Annotated[bool, typer.Option(
        "--allow-incomparable", help="Gate even if GPU/workload/window differ.")] = False,
    show_policy: Annotated[bool, typer.Option("--show-policy", help="Print the effective policy and exit.")] = False,
    max_increase_pct: Annotated[float | None, typer.Option(
        "--max-increase-pct", help="Optional relative floor: a kernel must also grow at least this % per "
        "iteration to fail (default 0: its own noise decides).")] = None,
    abs_floor_us: Annotated[float | None, typer.Option(
        "--abs-floor-us", help="Ignore changes under this many µs per iteration per GPU (default 2).")] = None,
    share_floor: Annotated[float | None, typer.Option(
        "--share-floor", help="Ignore kernels under this share of the iteration (default 0.005).")] = None,
    alpha: Annotated[float | None, typer.Option(
        "--alpha", help="Significance level of the total-kernel-time rule (default 0.05).")] = None,
    fpr: Annotated[float | None, typer.Option(
        "--fpr", help="False-positive rate per comparison, split over the kernels tested (default 0.02).")] = None,
    min_effect_pct: Annotated[float | None, typer.Option(
        "--min-effect-pct", help="Practical significance: a kernel's or op's regression fails only when it costs at "
        "least this % of the iteration (default 0.5); smaller significant ones are shown as below floor.")] = None,
    history_ref: HistoryRefOpt = None,
    total_increase_pct: Annotated[float | None, typer.Option(
        "--total-increase-pct", help="Total kernel time growth that fails (default 3).")] = None,
    new_kernel: Annotated[str | None, typer.Option(
        "--new-kernel", help="fail or warn for new kernels above the share floor.")] = None,
    ignore: Annotated[list[str] | None, typer.Option(
        "--ignore", help="Glob or /regex/ of kernels never gated (repeatable).")] = None,
    step_gate: Annotated[bool | None, typer.Option(
        "--step-gate/--no-step-gate", help="Fail on a step-time regression beyond its noise (default: on; "
        "[tool.kbase.gate] step_gate). Off: the step is still judged and shown, as a warning.")] = None,
    step_run_noise: Annotated[float | None, typer.Option(
        "--step-run-noise", help="Between-process sd of a capture's mean step time assumed without repeat "
        "captures or history (default 0.07, calibrated on real A/A pairs).")] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the JSON report here.")] = None,
    comment_md: Annotated[Path | None, typer.Option(
        "--comment-md",
        help="Write the PR/MR comment (Markdown, under 65,536 characters) here, whatever the verdict.")] = None,
    if_no_baseline: Annotated[str, typer.Option(
        "--if-no-baseline", help="fail (exit 2) or pass with a notice when a side has no baseline yet "
        "(the first run, a fork PR without the store).")] = "fail",
    fmt: DiffFormatOpt = "table",
    show_all: AllOpt = False,
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    full_names: FullNamesOpt = False,
    quiet: QuietOpt = False,
    gpu_hour_cost: GpuHourCostOpt = None,
    fleet_gpus: FleetGpusOpt = None,
    unit: UnitOpt = None,
    fail_on_cannot_judge: Annotated[bool, typer.Option(
        "--fail-on-cannot-judge", help="Fail on kernels that cannot be judged (too few launches, no history or "
        "repeat captures); by default they are listed as warnings.")] = False,
    window: dict[str, Any] | None = None,
) -> None:
    """CI gate: exit 0 pass, 1 kernel (or total) regression, 2 usage/missing baseline/incomparable, 3 internal error."""
    raise typer.Exit(run_gate(
        a, b, name=name, base_ref=base_ref, strict=strict, warn_only=warn_only, allow_incomparable=allow_incomparable,
        show_policy=show_policy, max_increase_pct=max_increase_pct, abs_floor_us=abs_floor_us,
        share_floor=share_floor, alpha=alpha, fpr=fpr, min_effect_pct=min_effect_pct, history_ref=history_ref,
        total_increase_pct=total_increase_pct, new_kernel=new_kernel, ignore=ignore, step_gate=step_gate,
        step_run_noise=step_run_noise, junit=junit, output=output, comment_md=comment_md,
        if_no_baseline=if_no_baseline, fmt=fmt, show_all=show_all, db=db, repo=repo, wide=wide,
        full_names=full_names, quiet=quiet, gpu_hour_cost=gpu_hour_cost, fleet_gpus=fleet_gpus, unit=unit,
        fail_on_cannot_judge=fail_on_cannot_judge, window=window))


@app.command()
def accept(
    pattern: Annotated[str | None, typer.Argument(
        help="Kernel: glob or /regex/ on names, or a name / #id looked up in the store.")] = None,
    rev: Annotated[str | None, typer.Option("--rev", help="The commit that introduced the regression.")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why it is accepted.")] = None,
    expires: Annotated[str | None, typer.Option(
        "--expires", help="YYYY-MM-DD after which the gate fails again.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the stored acceptances (of --name, or all).")] = False,
    revoke: Annotated[int | None, typer.Option("--revoke", help="Remove the acceptance with this id.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json (with --list).")] = "table",
    name: NameOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Acknowledge a known regression so the gate lists it as accepted, not failing (--list, --revoke ID)."""
    import kbase
    from kbase.render.layout import ellipsize

    settings = make_settings(repo=repo, db=db, name=name)
    if list_ or revoke is not None:
        if pattern is not None or rev or reason or expires or (list_ and revoke is not None):
            raise InputError("--list and --revoke take no pattern, --rev, --reason or --expires (and not each other)")
        if revoke is not None:
            row = kbase.revoke(revoke, settings)
            if not quiet:
                console(stderr=True).print(f"revoked #{row.id}: {ellipsize(row.pattern, 100)} at {row.commit[:12]} "
                                           f"({row.reason})",
                                           highlight=False, markup=False)
            return
        _list_acceptances(kbase.acceptances(settings, all_workloads=name is None), check_choice(fmt, ListFormat),
                          wide=wide)
        return
    if pattern is None or rev is None or reason is None:
        raise InputError("give a PATTERN, --rev and --reason (or --list / --revoke ID)")
    exp = None
    if expires:
        try:
            exp = date.fromisoformat(expires)
        except ValueError:
            raise SettingsError("expected a date YYYY-MM-DD", field="expires", value=expires) from None
    if not reason.strip():
        raise InputError("must not be empty", field="reason", value=reason)
    row = kbase.accept(pattern, rev=rev, reason=reason, expires=exp, settings=settings)
    if not quiet:
        console(stderr=True).print(f"accepted #{row.id}: {ellipsize(row.pattern, 100)} at {row.commit[:12]} ({reason})"
                                   + (f", expires {exp}" if exp else ""), highlight=False, markup=False)


def _list_acceptances(rows: list[AcceptanceRecord], fmt: str, wide: bool = False) -> None:
    from kbase import jsonable
    from kbase.render.layout import Column, print_table

    docs = [{"id": a.id, "workload": a.workload, "pattern": a.pattern, "commit": a.commit, "reason": a.reason,
             "author": a.author, "created_at": a.created_at.isoformat() if a.created_at else None,
             "expires": a.expires.isoformat() if a.expires else None} for a in rows]
    if fmt == ListFormat.JSON:
        sys.stdout.write(jsonable.dumps({"schema": "kbase.acceptances/1", "acceptances": docs}) + "\n")
        return
    if not docs:
        console().print("no acceptances stored", highlight=False)
        return
    cols = [Column("id", "id", 0), Column("workload", "workload", 2, min_width=8, max_width=24, shrink=True,
                                          justify="left"),
            Column("pattern", "pattern", 0, min_width=16, want_width=40, max_width=80, shrink=True, justify="left"),
            Column("commit", "commit", 0, justify="left"), Column("expires", "expires", 1, justify="left"),
            Column("reason", "reason", 3, min_width=12, max_width=60, shrink=True, justify="left"),
            Column("author", "author", 4, min_width=8, max_width=30, shrink=True, justify="left")]
    cells = [{"id": f"#{a.id}", "workload": a.workload, "pattern": a.pattern, "commit": a.commit[:12],
              "expires": a.expires.isoformat() if a.expires else "never", "reason": a.reason, "author": a.author or ""}
             for a in rows]
    print_table(console(), cols, cells, wide=wide, title=f"{len(rows)} acceptance(s)")
