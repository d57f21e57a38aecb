"""Diff and gate commands: diff, gate, accept."""

from __future__ import annotations

import os
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbase.cli.app import (
    DbOpt,
    NameOpt,
    RepoOpt,
    app,
    check_choice,
    check_writable,
    console,
    make_settings,
    window_options,
    write_output,
)
from kbase.enums import DiffFormat
from kbase.errors import InputError, SettingsError

if TYPE_CHECKING:
    from kbase.api import Comparison
    from kbase.comparison.gate import Verdict

AllOpt = Annotated[bool, typer.Option("--all", help="Also list unchanged and within-noise kernels.")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Error when a revision has no baseline of its own.")]
BaseRefOpt = Annotated[str | None, typer.Option(
    "--base-ref", help="Compare against the merge-base with this ref (pull requests).")]
DiffFormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json, md or csv.")]


@app.command()
@window_options
def diff(
    a: Annotated[str, typer.Argument(help="Before: git revision, @ID, or a profile file.")],
    b: Annotated[str | None, typer.Argument(help="After (default: HEAD's baseline).")] = None,
    name: NameOpt = None,
    base_ref: BaseRefOpt = None,
    strict: StrictOpt = False,
    fmt: DiffFormatOpt = "table",
    show_all: AllOpt = False,
    db: DbOpt = None,
    repo: RepoOpt = None,
    window: dict[str, Any] | None = None,
) -> None:
    """Which kernels grew, shrank, appeared or vanished between two baselines (per iteration)."""
    import kbase
    from kbase.render import diff as render_diff

    fmt = check_choice(fmt, DiffFormat)
    settings = make_settings(repo=repo, db=db, name=name, window=window)
    comparison = kbase.compare(a, b, settings, base_ref=base_ref, strict=strict)
    _emit(render_diff.diff_doc(comparison), comparison, fmt, show_all)


def _emit(doc: dict[str, Any], comparison: Comparison, fmt: str, show_all: bool,
          verdict: Verdict | None = None) -> None:
    from kbase.render import diff as render_diff

    if fmt == DiffFormat.JSON:
        sys.stdout.write(render_diff.diff_json(doc) + "\n")
    elif fmt == DiffFormat.MD:
        sys.stdout.write(render_diff.diff_md(doc, show_all, verdict))
    elif fmt == DiffFormat.CSV:
        sys.stdout.write(render_diff.diff_csv(comparison))
    else:
        render_diff.print_diff(doc, console(), show_all, verdict)


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
        "--max-increase-pct", help="Per-kernel growth per iteration that fails (default 5).")] = None,
    abs_floor_us: Annotated[float | None, typer.Option(
        "--abs-floor-us", help="Ignore changes under this many µs per iteration per GPU (default 2).")] = None,
    share_floor: Annotated[float | None, typer.Option(
        "--share-floor", help="Ignore kernels under this share of the iteration (default 0.005).")] = None,
    alpha: Annotated[float | None, typer.Option("--alpha", help="Significance level (default 0.05).")] = None,
    total_increase_pct: Annotated[float | None, typer.Option(
        "--total-increase-pct", help="Total kernel time growth that fails (default 3).")] = None,
    new_kernel: Annotated[str | None, typer.Option(
        "--new-kernel", help="fail or warn for new kernels above the share floor.")] = None,
    ignore: Annotated[list[str] | None, typer.Option(
        "--ignore", help="Glob or /regex/ of kernels never gated (repeatable).")] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the JSON report here.")] = None,
    fmt: DiffFormatOpt = "table",
    show_all: AllOpt = False,
    db: DbOpt = None,
    repo: RepoOpt = None,
    window: dict[str, Any] | None = None,
) -> None:
    """CI gate: exit 0 pass, 1 kernel (or total) regression, 2 usage/missing baseline/incomparable, 3 internal error."""
    import kbase
    from kbase.render import diff as render_diff

    policy = {"max_increase_pct": max_increase_pct, "abs_floor_us": abs_floor_us, "share_floor": share_floor,
              "alpha": alpha, "total_increase_pct": total_increase_pct, "new_kernel": new_kernel, "ignore": ignore}
    settings = make_settings(repo=repo, db=db, name=name, window=window, policy=policy)
    if show_policy:
        import json

        sys.stdout.write(json.dumps(settings.policy.as_dict(), indent=2) + "\n")
        return
    fmt = check_choice(fmt, DiffFormat)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    for path, field in ((output, "output"), (junit, "junit"), (summary, "step_summary")):
        check_writable(path, field)  # before any work: a bad path never follows a printed verdict
    result = kbase.gate(a, b, settings, base_ref=base_ref, strict=strict, allow_incomparable=allow_incomparable,
                        warn_only=warn_only)
    verdict = result.verdict
    doc = render_diff.diff_doc(result.comparison, verdict)
    if output:  # files first: a write that fails after all is exit 2 with no verdict printed
        write_output(output, render_diff.diff_json(doc) + "\n", "output")
    if junit:
        from kbase.render.junit import junit_xml

        write_output(junit, junit_xml(doc, verdict), "junit")
    if summary:
        write_output(summary, render_diff.diff_md(doc, show_all, verdict), "step_summary", append=True)
    _emit(doc, result.comparison, fmt, show_all, verdict)
    if fmt != DiffFormat.TABLE:
        from kbase.render.safe import inert

        for line in render_diff.verdict_lines(verdict):
            print(inert(line), file=sys.stderr)
    raise typer.Exit(verdict.code)


@app.command()
def accept(
    pattern: Annotated[str, typer.Argument(help="Glob or /regex/ on kernel names.")],
    rev: Annotated[str, typer.Option("--rev", help="The commit that introduced the regression.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is accepted.")],
    expires: Annotated[str | None, typer.Option(
        "--expires", help="YYYY-MM-DD after which the gate fails again.")] = None,
    name: NameOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """Acknowledge a known regression so the gate lists it as accepted, not failing."""
    import kbase

    settings = make_settings(repo=repo, db=db, name=name)
    exp = None
    if expires:
        try:
            exp = date.fromisoformat(expires)
        except ValueError:
            raise SettingsError("expected a date YYYY-MM-DD", field="expires", value=expires) from None
    if not reason.strip():
        raise InputError("must not be empty", field="reason", value=reason)
    row = kbase.accept(pattern, rev=rev, reason=reason, expires=exp, settings=settings)
    console(stderr=True).print(f"accepted #{row.id}: {pattern} at {row.commit[:12]} ({reason})"
                               + (f", expires {exp}" if exp else ""), highlight=False, markup=False)
