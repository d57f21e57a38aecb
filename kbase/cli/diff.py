"""Diff and gate commands: diff, gate, accept."""

from __future__ import annotations

import os
import sys
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from kbase.enums import DiffFormat, GroupBy, ListFormat
from kbase.errors import InputError, NoBaselineError, SettingsError, UnknownRevisionError, UnknownWorkloadError

if TYPE_CHECKING:
    from kbase.comparison.gate import Verdict
    from kbase.comparison.result import Comparison
    from kbase.settings import Settings
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
    import kbase
    from kbase.render import diff as render_diff

    fmt = check_choice(fmt, DiffFormat)
    by_op = _by_op(by, fmt)
    settings = make_settings(repo=repo, db=db, name=name, window=window, gpu_hour_cost=gpu_hour_cost,
                             fleet_gpus=fleet_gpus, policy={"unit": unit})
    comparison = kbase.compare(a, b, settings, base_ref=base_ref, strict=strict, history_ref=history_ref)
    _emit(render_diff.diff_doc(comparison), comparison, fmt, show_all, wide=wide, full_names=full_names, quiet=quiet,
          by_op=by_op)


def _by_op(by: str, fmt: str) -> bool:
    by_op = check_choice(by, GroupBy, flag="--by") == GroupBy.OP
    if by_op and fmt in (DiffFormat.BMF, DiffFormat.GITHUB_BENCHMARK):
        raise InputError("--by op does not apply to the bmf / github-benchmark formats", field="by", value=by)
    return by_op


def _emit(doc: dict[str, Any], comparison: Comparison, fmt: str, show_all: bool, verdict: Verdict | None = None,
          wide: bool = False, full_names: bool = False, quiet: bool = False, by_op: bool = False) -> None:
    from kbase.render.formats import DIFF, DiffJob, Sink

    job = DiffJob(doc, comparison, show_all, verdict, wide=wide, full_names=full_names, quiet=quiet, by_op=by_op)
    DIFF.render(fmt, job, Sink.stdout(console))


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
    import kbase
    from kbase.render import diff as render_diff

    policy = {"max_increase_pct": max_increase_pct, "abs_floor_us": abs_floor_us, "share_floor": share_floor,
              "alpha": alpha, "total_increase_pct": total_increase_pct, "new_kernel": new_kernel, "ignore": ignore,
              "fpr": fpr, "min_effect_pct": min_effect_pct, "step_gate": step_gate, "step_run_noise": step_run_noise,
              "unit": unit, "cannot_judge": "fail" if fail_on_cannot_judge else None}
    settings = make_settings(repo=repo, db=db, name=name, window=window, policy=policy, gpu_hour_cost=gpu_hour_cost,
                             fleet_gpus=fleet_gpus)
    if ignore and any(p.startswith("#") for p in ignore):  # a kernel's #id, as tables show it
        policy["ignore"] = [kbase.kernel_pattern(p, settings) if p.startswith("#") else p for p in ignore]
        settings = make_settings(repo=repo, db=db, name=name, window=window, policy=policy,
                                 gpu_hour_cost=gpu_hour_cost, fleet_gpus=fleet_gpus)
    if show_policy:
        from kbase.render.policy_toml import policy_toml

        sys.stdout.write(policy_toml(settings.policy.as_dict()))
        return
    fmt = check_choice(fmt, DiffFormat)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if_no_baseline = check_choice(if_no_baseline, NoBaselinePolicy, flag="--if-no-baseline")
    from kbase.render.gate_files import GateFiles, check_gate_files, write_gate_files
    from kbase.store.schema.errors import NoStoreError

    files = GateFiles(output=output, comment_md=comment_md, junit=junit, step_summary=summary)
    check_gate_files(files)  # before any work: a bad path never follows a printed verdict
    try:
        result = kbase.gate(a, b, settings, base_ref=base_ref, strict=strict, allow_incomparable=allow_incomparable,
                            warn_only=warn_only, history_ref=history_ref)
    except (NoBaselineError, NoStoreError, UnknownRevisionError, UnknownWorkloadError) as exc:
        if if_no_baseline != NoBaselinePolicy.PASS or not _nothing_to_compare(exc, a, b):
            raise
        reason = str(exc)
        if isinstance(exc, UnknownWorkloadError):  # no stored name close to it: this workload's first run
            reason = (f"workload {settings.workload!r} has no baseline in this store yet (it holds "
                      f"{', '.join(exc.stored[:10])}{', …' if len(exc.stored) > 10 else ''}): its first run")
        _pass_without_baseline(reason, settings, comment_md, quiet)
        raise typer.Exit(0) from None
    verdict = result.verdict
    doc = write_gate_files(result, files, show_all=show_all)  # files first: a failed write prints no verdict
    _emit(doc, result.comparison, fmt, show_all, verdict, wide=wide, full_names=full_names, quiet=quiet)
    if fmt != DiffFormat.TABLE and not quiet:
        from kbase.render.safe import inert

        for line in render_diff.verdict_lines(verdict):
            print(inert(line), file=sys.stderr)
    raise typer.Exit(verdict.code)


class NoBaselinePolicy(StrEnum):
    FAIL = "fail"
    PASS = "pass"


def _nothing_to_compare(exc: Exception, a: str | None, b: str | None) -> bool:
    """A missing baseline or store, a parent revision that does not exist (``HEAD~1`` of a root commit), or a
    workload the store has never held while no stored name is close to it: the first run. A misspelt revision,
    or a workload name close to a stored one (``resnet5`` beside ``resnet50``), is still an error."""
    if isinstance(exc, UnknownRevisionError):
        return any(("~" in r or "^" in r) for r in (a or "HEAD~1", b or "") if r)
    if isinstance(exc, UnknownWorkloadError):
        return exc.close is None
    return True


def _pass_without_baseline(reason: str, settings: Settings, comment_md: Path | None, quiet: bool) -> None:
    """--if-no-baseline pass: say so where CI shows it, and leave the comment saying why."""
    from kbase.render.gate_files import write_no_baseline_comment
    from kbase.render.safe import inert

    text = f"no baseline to compare with, passing: {reason}"
    if os.environ.get("GITHUB_ACTIONS") == "true":
        print(f"::notice title=kbase gate::{inert(text)}")
    elif not quiet:
        print(f"kbase gate: PASS (notice: {inert(text)})", file=sys.stderr)
    if comment_md:
        try:
            from kbase.gitrepo import commit_info

            head = commit_info(settings.repo).hash
        except InputError:
            head = "?"
        write_no_baseline_comment(comment_md, settings.workload, head, reason)


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
