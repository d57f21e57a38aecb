"""Diff and gate commands: diff, gate, accept."""

from __future__ import annotations

import os
import sys
from datetime import date
from pathlib import Path
from typing import Annotated, Optional

import typer

from kbase.cli.app import (
    DbOpt, GpuOpt, IterationsOpt, IterKernelOpt, MarkerOpt, NameOpt, RepoOpt, TrimOpt, WarmupOpt, app, console,
    window_spec,
)
from kbase.errors import InputError

AllOpt = Annotated[bool, typer.Option("--all", help="Also list unchanged and within-noise kernels.")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Error when a revision has no baseline of its own.")]
BaseRefOpt = Annotated[Optional[str], typer.Option("--base-ref", help="Compare against the merge-base with this ref (pull requests).")]
DiffFormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json, md or csv.")]


def _compare(a: str | None, b: str | None, *, name, base_ref, strict, repo, db, spec, policy_flags, default_pair):
    """Resolve both sides and diff them. Returns (result, before, after, notes, engine, url)."""
    from kbase.settings import find_project_root, load_tool_config
    from kbase.compare.diff import compute_diff
    from kbase.compare.policy import load_policy
    from kbase.compare.resolve import resolve
    from kbase.store import open_store

    cfg = load_tool_config(find_project_root(repo))
    policy = load_policy(cfg.get("gate"), policy_flags)
    name = name or cfg.get("name")
    notes: list[str] = []
    if base_ref is not None:
        from kbase.gitrepo import merge_base, open_repo

        head = b or a or "HEAD"
        mb = merge_base(open_repo(repo), base_ref, head)
        notes.append(f"--base-ref {base_ref}: comparing against merge-base {mb[:12]}")
        a, b = mb, head
    elif a is None:
        a, b = default_pair
    elif b is None:
        b = "HEAD"
    state: dict = {}

    def engine():
        if "engine" not in state:
            state["engine"], state["url"] = open_store(db, repo)
        return state["engine"]

    before = resolve(a, workload=name, repo=repo, spec=spec, strict=strict, open_engine=engine)
    after = resolve(b, workload=name, repo=repo, spec=spec, strict=strict, open_engine=engine)
    notes += before.notes + after.notes
    result = compute_diff(before.side, after.side, policy)
    return result, before, after, notes, state.get("engine"), state.get("url", "")


@app.command()
def diff(
    a: Annotated[str, typer.Argument(help="Before: git revision, @ID, or a profile file.")],
    b: Annotated[Optional[str], typer.Argument(help="After (default: HEAD's baseline).")] = None,
    name: NameOpt = None,
    base_ref: BaseRefOpt = None,
    strict: StrictOpt = False,
    fmt: DiffFormatOpt = "table",
    show_all: AllOpt = False,
    marker: MarkerOpt = None,
    iteration_kernel: IterKernelOpt = None,
    iterations: IterationsOpt = None,
    warmup: WarmupOpt = None,
    trim: TrimOpt = None,
    gpu: GpuOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """Which kernels grew, shrank, appeared or vanished between two baselines (per iteration)."""
    from kbase.render import diff as render_diff
    from kbase.compare.resolve import describe

    if fmt not in ("table", "json", "md", "csv"):
        raise InputError(f"--format {fmt!r}: unknown format (choose one of table, json, md, csv)")
    spec = window_spec(marker, iteration_kernel, iterations, warmup, trim, gpu)
    result, before, after, notes, _, _ = _compare(a, b, name=name, base_ref=base_ref, strict=strict, repo=repo, db=db,
                                                  spec=spec, policy_flags={}, default_pair=(a, "HEAD"))
    doc = render_diff.diff_doc(result, describe(before), describe(after), notes=notes)
    _emit(doc, result, fmt, show_all)


def _emit(doc, result, fmt, show_all, verdict=None):
    from kbase.render import diff as render_diff

    if fmt == "json":
        sys.stdout.write(render_diff.diff_json(doc) + "\n")
    elif fmt == "md":
        sys.stdout.write(render_diff.diff_md(doc, show_all, verdict))
    elif fmt == "csv":
        sys.stdout.write(render_diff.diff_csv(result))
    else:
        render_diff.print_diff(doc, console(), show_all, verdict)


@app.command()
def gate(
    a: Annotated[Optional[str], typer.Argument(help="Before (default HEAD~1, or the merge-base with --base-ref).")] = None,
    b: Annotated[Optional[str], typer.Argument(help="After (default HEAD).")] = None,
    name: NameOpt = None,
    base_ref: BaseRefOpt = None,
    strict: StrictOpt = False,
    warn_only: Annotated[bool, typer.Option("--warn-only", help="Report regressions but exit 0.")] = False,
    allow_incomparable: Annotated[bool, typer.Option("--allow-incomparable", help="Gate even if GPU/workload/window differ.")] = False,
    show_policy: Annotated[bool, typer.Option("--show-policy", help="Print the effective policy and exit.")] = False,
    max_increase_pct: Annotated[Optional[float], typer.Option("--max-increase-pct", help="Per-kernel growth per iteration that fails (default 5).")] = None,
    abs_floor_us: Annotated[Optional[float], typer.Option("--abs-floor-us", help="Ignore changes under this many µs per iteration per GPU (default 2).")] = None,
    share_floor: Annotated[Optional[float], typer.Option("--share-floor", help="Ignore kernels under this share of the iteration (default 0.005).")] = None,
    alpha: Annotated[Optional[float], typer.Option("--alpha", help="Significance level (default 0.05).")] = None,
    total_increase_pct: Annotated[Optional[float], typer.Option("--total-increase-pct", help="Total kernel time growth that fails (default 3).")] = None,
    new_kernel: Annotated[Optional[str], typer.Option("--new-kernel", help="fail or warn for new kernels above the share floor.")] = None,
    ignore: Annotated[Optional[list[str]], typer.Option("--ignore", help="Glob or /regex/ of kernels never gated (repeatable).")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write JUnit XML here.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the JSON report here.")] = None,
    fmt: DiffFormatOpt = "table",
    show_all: AllOpt = False,
    marker: MarkerOpt = None,
    iterations: IterationsOpt = None,
    warmup: WarmupOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """CI gate: exit 0 pass, 1 kernel (or total) regression, 2 usage/missing baseline/incomparable, 3 internal error."""
    from kbase.render import diff as render_diff
    from kbase.compare.gate import active_acceptances, decide
    from kbase.compare.resolve import describe

    flags = {"max_increase_pct": max_increase_pct, "abs_floor_us": abs_floor_us, "share_floor": share_floor,
             "alpha": alpha, "total_increase_pct": total_increase_pct, "new_kernel": new_kernel, "ignore": ignore}
    if show_policy:
        import json

        from kbase.settings import find_project_root, load_tool_config
        from kbase.compare.policy import load_policy

        policy = load_policy(load_tool_config(find_project_root(repo)).get("gate"), flags)
        sys.stdout.write(json.dumps(policy.as_dict(), indent=2) + "\n")
        return
    if fmt not in ("table", "json", "md", "csv"):
        raise InputError(f"--format {fmt!r}: unknown format (choose one of table, json, md, csv)")
    spec = window_spec(marker, None, iterations, warmup, None, None)
    result, before, after, notes, engine, url = _compare(
        a, b, name=name, base_ref=base_ref, strict=strict, repo=repo, db=db, spec=spec, policy_flags=flags,
        default_pair=("HEAD~1", "HEAD"))
    acceptances = []
    if engine is not None and after.commit:
        acceptances = active_acceptances(_acceptances(engine, after.side.meta.get("workload")),
                                         in_range=_range_check(repo, before.commit, after.commit))
    verdict = decide(result, acceptances, allow_incomparable=allow_incomparable, warn_only=warn_only)
    doc = render_diff.diff_doc(result, describe(before), describe(after), verdict=verdict, notes=notes)
    _emit(doc, result, fmt, show_all, verdict)
    if output:
        output.write_text(render_diff.diff_json(doc) + "\n", encoding="utf-8")
    if junit:
        junit.write_text(render_diff.junit_xml(doc, verdict), encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(render_diff.diff_md(doc, show_all, verdict))
    if fmt != "table":
        for line in render_diff.verdict_lines(verdict):
            print(line, file=sys.stderr)
    raise typer.Exit(verdict.code)


def _acceptances(engine, workload):
    from sqlmodel import Session, select

    from kbase.store.models import Acceptance

    with Session(engine) as session:
        q = select(Acceptance)
        if workload:
            q = q.where(Acceptance.workload == workload)
        return list(session.exec(q).all())


def _range_check(repo, before_commit, after_commit):
    """An acceptance applies when its commit lies in (before, after]."""
    from kbase.gitrepo import open_repo

    try:
        r = open_repo(repo)
    except InputError:
        return lambda c: c == after_commit

    def in_range(c: str) -> bool:
        try:
            if not r.is_ancestor(c, after_commit):
                return False
            return before_commit is None or not r.is_ancestor(c, before_commit)
        except Exception:  # noqa: BLE001 - unknown commit in a shallow clone: exact match only
            return c == after_commit

    return in_range


@app.command()
def accept(
    pattern: Annotated[str, typer.Argument(help="Glob or /regex/ on kernel names.")],
    rev: Annotated[str, typer.Option("--rev", help="The commit that introduced the regression.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is accepted.")],
    expires: Annotated[Optional[str], typer.Option("--expires", help="YYYY-MM-DD after which the gate fails again.")] = None,
    name: NameOpt = None,
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """Acknowledge a known regression so the gate lists it as accepted, not failing."""
    from kbase.gitrepo import author, open_repo, resolve_commit
    from kbase.store.models import Acceptance
    from kbase.compare.policy import _check_pattern
    from kbase.store import DEFAULT_WORKLOAD, open_store, write_transaction

    _check_pattern(pattern, "PATTERN")
    if not reason.strip():
        raise InputError("--reason must not be empty")
    exp = None
    if expires:
        try:
            exp = date.fromisoformat(expires)
        except ValueError:
            raise InputError(f"--expires {expires!r}: expected a date YYYY-MM-DD") from None
    commit = resolve_commit(open_repo(repo), rev).hexsha
    if name is None:  # as snapshot/diff/gate do: [tool.kbase] name is the default workload
        from kbase.settings import find_project_root, load_tool_config

        name = load_tool_config(find_project_root(repo)).get("name")
    engine, url = open_store(db, repo)
    row = Acceptance(workload=name or DEFAULT_WORKLOAD, pattern=pattern, commit=commit, reason=reason,
                     author=author(repo), expires=exp)
    with write_transaction(engine, url) as conn:
        new_id = conn.execute(Acceptance.__table__.insert().values(**row.model_dump(exclude={"id"}))
                              .returning(Acceptance.__table__.c.id)).scalar_one()
    console(stderr=True).print(f"accepted #{new_id}: {pattern} at {commit[:12]} ({reason})"
                               + (f", expires {exp}" if exp else ""), highlight=False, markup=False)
