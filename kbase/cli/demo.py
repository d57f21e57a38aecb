"""``kbase demo``: the whole pipeline on generated data, for a fresh machine."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from kbase.cli.shared import QuietOpt, app, console


@app.command()
def demo(
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="Keep the demo's repository, exports and store here.")] = None,
    iterations: Annotated[int, typer.Option("--iterations", help="Iterations per generated capture.")] = 12,
    quiet: QuietOpt = False,
) -> None:
    """Generate two captures at two commits, store both, diff them and run the gate."""
    import kbase
    from kbase.enums import KernelClass
    from kbase.render import diff as render_diff
    from kbase.render import leaderboard as render
    from kbase.synth import demo as demo_lib
    from kbase.units import fmt_delta_pct

    out = console()
    if quiet:  # everything but the last line goes nowhere
        from rich.console import Console

        out = Console(file=io.StringIO(), width=out.width)
    if directory is not None:  # SQLite and git write its files following links: none may be one
        from kbase.safe_write import OutputDir

        with OutputDir(directory, "dir") as d:
            d.refuse_links([f"{base}{side}" for base in ("train_v1.sqlite", "train_v2.sqlite", "kbase.db")
                            for side in ("", "-wal", "-shm", "-journal")] + ["repo", "kbase.db.migrate-lock"])
    with tempfile.TemporaryDirectory(prefix="kbase-demo-") as tmp:
        root = directory or Path(tmp)
        out.rule("1. generate a 2-GPU Nsight Systems export (real schema) and a git repository")
        run = demo_lib.prepare(root, iterations=iterations)
        for line in (f"repository {run.repo}", f"exports {run.before_export.name}, {run.after_export.name}",
                     f"store {run.db_url}"):  # one print each: the console shows a newline inside a text as \n
            out.print(line, highlight=False, markup=False)
        settings = kbase.Settings.load(repo=run.repo, db=run.db_url, name="demo-train")
        out.rule("2. kbase snapshot at commit 1 (HEAD~1)")
        first = kbase.snapshot(run.before_export, settings)
        render.print_leaderboard(first.leaderboard, out, limit=12, title=f"Baseline @{first.baseline.id}")
        out.rule("3. commit 2 changes the GEMM config; kbase snapshot at HEAD")
        demo_lib.second_commit(run)
        second = kbase.snapshot(run.after_export, settings)
        out.print(f"stored @{first.baseline.id} at {first.baseline.commit[:12]} and @{second.baseline.id} at "
                  f"{second.baseline.commit[:12]}", highlight=False)
        out.rule("4. kbase diff HEAD~1 HEAD and kbase gate")
        result = kbase.gate("HEAD~1", "HEAD", settings)
        doc = render_diff.diff_doc(result.comparison, result.verdict)
        render_diff.print_diff(doc, out, verdict=result.verdict)
        injected = next(r for r in doc["kernels"] if r["name"] == run.slowed_kernel)
        if quiet:
            out = console()
        line = (f"injected: {run.slowed_kernel[:70]}... made {demo_lib.SLOWDOWN:.2f}x slower per launch -> "
                f"found as '{KernelClass(injected['class']).label}' ({fmt_delta_pct(injected['delta_pct'])}), "
                f"gate exit {result.verdict.code}")
        if not quiet:
            out.print()  # a blank line; the console writes a newline inside a text as the two characters \n
        out.print(line, highlight=False, markup=False, soft_wrap=True)  # one line whatever the width
        if directory and not quiet:
            out.print(f"kept in {directory}: try  kbase list --db {run.db_url}", highlight=False, markup=False)
