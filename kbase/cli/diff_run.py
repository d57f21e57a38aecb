"""What ``kbase diff`` and ``kbase gate`` do once their flags are parsed, apart from the Typer app (``cli.diff``
declares the commands and calls these): a plain stored diff or gate answered without the command line
(``cli.fast_diff``) runs exactly this code."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbase.cli.output import console
from kbase.cli.settings_flags import check_choice, make_settings
from kbase.enums import DiffFormat, GroupBy
from kbase.errors import InputError, NoBaselineError, UnknownRevisionError, UnknownWorkloadError

if TYPE_CHECKING:
    from kbase.comparison.gate import Verdict
    from kbase.comparison.result import Comparison
    from kbase.settings import Settings


def run_diff(a: str, b: str | None, *, name: str | None = None, base_ref: str | None = None, strict: bool = False,
             history_ref: str | None = None, fmt: str = "table", show_all: bool = False, db: str | None = None,
             repo: Path | None = None, wide: bool = False, full_names: bool = False, quiet: bool = False,
             gpu_hour_cost: float | None = None, fleet_gpus: int | None = None, by: str = "kernel",
             unit: str | None = None, window: dict[str, Any] | None = None) -> None:
    """``kbase diff``: the comparison (one ``kbase.compare``), rendered in ``fmt``."""
    import kbase
    from kbase.render import diff as render_diff

    fmt = check_choice(fmt, DiffFormat)
    by_op = _by_op(by, fmt)
    settings = make_settings(repo=repo, db=db, name=name, window=window, gpu_hour_cost=gpu_hour_cost,
                             fleet_gpus=fleet_gpus, policy={"unit": unit})
    comparison = kbase.compare(a, b, settings, base_ref=base_ref, strict=strict, history_ref=history_ref)
    _emit(render_diff.diff_doc(comparison), comparison, fmt, show_all, wide=wide, full_names=full_names, quiet=quiet,
          by_op=by_op)


def run_gate(a: str | None, b: str | None, *, name: str | None = None, base_ref: str | None = None,
             strict: bool = False, warn_only: bool = False, allow_incomparable: bool = False,
             show_policy: bool = False, max_increase_pct: float | None = None, abs_floor_us: float | None = None,
             share_floor: float | None = None, alpha: float | None = None, fpr: float | None = None,
             min_effect_pct: float | None = None, history_ref: str | None = None,
             total_increase_pct: float | None = None, new_kernel: str | None = None, ignore: list[str] | None = None,
             step_gate: bool | None = None, step_run_noise: float | None = None, junit: Path | None = None,
             output: Path | None = None, comment_md: Path | None = None, if_no_baseline: str = "fail",
             fmt: str = "table", show_all: bool = False, db: str | None = None, repo: Path | None = None,
             wide: bool = False, full_names: bool = False, quiet: bool = False, gpu_hour_cost: float | None = None,
             fleet_gpus: int | None = None, unit: str | None = None, fail_on_cannot_judge: bool = False,
             window: dict[str, Any] | None = None) -> int:
    """``kbase gate``: the verdict, its files and its exit code (0 pass, 1 regression; errors raise)."""
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
        return 0
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
        return 0
    verdict = result.verdict
    doc = write_gate_files(result, files, show_all=show_all)  # files first: a failed write prints no verdict
    _emit(doc, result.comparison, fmt, show_all, verdict, wide=wide, full_names=full_names, quiet=quiet)
    if fmt != DiffFormat.TABLE and not quiet:
        from kbase.render.safe import inert

        for line in render_diff.verdict_lines(verdict):
            print(inert(line), file=sys.stderr)
    return verdict.code


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
