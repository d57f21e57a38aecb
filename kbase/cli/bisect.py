"""``kbase bisect``: the commit between two stored baselines that made a kernel, an op or the step fatter."""

from __future__ import annotations

from typing import Annotated

import typer

from kbase.cli.shared import DbOpt, NameOpt, RepoOpt, WideOpt, app, check_choice, console, make_settings, window_options
from kbase.enums import BisectFormat
from kbase.errors import InputError


@app.command()
@window_options
def bisect(
    good: Annotated[str | None, typer.Argument(help="A revision with a stored baseline where the target was fine.")]
    = None,
    bad: Annotated[str | None, typer.Argument(help="A later revision on its first-parent line where it was not.")]
    = None,
    run: Annotated[str, typer.Option(
        "--run", help="The capture command, run by the shell in a separate worktree of each midpoint; {out} names "
        "the profile path kbase reads (required).")] = "",
    kernel: Annotated[str | None, typer.Option(
        "--kernel", help="Bisect these kernels (a name, glob or /regex/). Default: the kernel that changed most "
        "between GOOD and BAD.")] = None,
    op: Annotated[str | None, typer.Option("--op", help="Bisect this op (its key, or its name without scope).")]
    = None,
    step: Annotated[bool, typer.Option("--step", help="Bisect the step time per iteration.")] = False,
    repeats: Annotated[int, typer.Option(
        "--repeats", help="Runs of the command at most per midpoint while it stays undecided.")] = 3,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one run of the command may take.")] = 3600.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan; run nothing, store nothing.")] = False,
    from_steps: Annotated[bool, typer.Option(
        "--from-steps", help="GOOD and BAD from the step kbase steps finds (of --kernel when given).")] = False,
    capture_ends: Annotated[bool, typer.Option(
        "--capture-ends", help="Capture GOOD and BAD with --run too, and judge on those captures: for a --run that "
        "measures another thing than the stored baselines (fewer GPUs, another window).")] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text, json or markdown.")] = "text",
    name: NameOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    window: dict | None = None,
) -> None:
    """Find the commit that changed a kernel, an op or the step between GOOD and BAD: each midpoint is checked
    out in its own worktree (your working tree, index and stash are untouched), captured with --run, stored as a
    baseline of kind bisect and judged against both ends with the gate's statistics: good, bad, undecided
    (rerun up to --repeats, then reported as a range) or skipped (the command failed). Commits with baselines
    are judged without running. Ctrl-C removes the worktree and keeps the snapshots already stored."""
    import kbase.api.bisecting as api
    from kbase.comparison.bisect import Target, TargetKind

    fmt = check_choice(fmt, BisectFormat)
    chosen = [t for t in ((TargetKind.KERNEL, kernel), (TargetKind.OP, op), (TargetKind.STEP, step or None))
              if t[1] is not None]
    if len(chosen) > 1:
        raise InputError("name one target: --kernel, --op or --step")
    if repeats < 1:
        raise InputError("must be at least 1", field="repeats", value=repeats)
    settings = make_settings(repo=repo, db=db, name=name, window=window)
    target = None
    if chosen:
        kind, text = chosen[0]
        target = Target(kind, "" if kind == TargetKind.STEP else _pattern(kind, str(text), settings))
    judged: list = []

    def progress(mid) -> None:  # noqa: ANN001 - api.bisecting.Midpoint
        judged.append(mid)
        if fmt == BisectFormat.TEXT:
            _progress(mid)

    try:
        result = api.bisect(good, bad, settings, run=run, target=target, repeats=repeats, timeout_s=timeout,
                            dry_run=dry_run, from_steps=from_steps, capture_ends=capture_ends,
                            progress=progress)
    except KeyboardInterrupt:
        stored = sum(1 for m in judged if m.runs and m.baseline_ids)
        typer.echo(f"kbase bisect: interrupted; the midpoint's worktree is removed, the {stored} midpoint(s) "
                   "captured before are kept in the store (a new bisect reuses them)", err=True)
        raise typer.Exit(130) from None
    from kbase.render.formats import BISECT, BisectJob, Sink

    BISECT.render(fmt, BisectJob(result, wide=wide), Sink.stdout(console))


def _pattern(kind: str, text: str, settings) -> str:  # noqa: ANN001 - Settings, imported lazily
    """A kernel given by name or #id becomes its exact pattern (as ``kbase accept``); globs, regexes, ops as given."""
    if kind != "kernel":
        return text
    import kbase

    return kbase.kernel_pattern(text, settings)


def _progress(mid) -> None:  # noqa: ANN001 - api.bisecting.Midpoint
    from kbase.render.safe import term_text

    how = "reused" if mid.reused and not mid.runs else f"{mid.runs} run(s)"
    typer.echo(f"kbase bisect: {mid.commit[:12]} {mid.verdict} ({how})"
               + (f": {term_text(mid.why)[:200]}" if mid.why else ""), err=True)
