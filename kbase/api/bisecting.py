"""Front door, ``bisect``: find the commit that made a kernel, an op or the step fatter between two stored
baselines, capturing the commits in between with the user's own command (``api.bisect_capture``) and judging
each against both ends with the diff the gate decides on (``comparison.bisect``). Midpoints are stored as
baselines of kind ``bisect``; a commit that already has a baseline is judged on it, not run again."""

from __future__ import annotations

import math
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.api.common import _store, with_workload
from kbase.errors import InputError
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.comparison.bisect import MidpointVerdict, StepNoise, Target
    from kbase.comparison.result import Comparison
    from kbase.store.engine import Store
    from kbase.store.schema.records import BaselineRecord

BISECT_KIND = "bisect"


@dataclass
class Midpoint:
    """One commit the search judged, in the order it was judged."""

    commit: str
    index: int  # position on the line: GOOD 0 .. BAD n
    verdict: MidpointVerdict
    reused: bool  # judged on baselines stored before this bisect (no capture needed)
    runs: int = 0  # CMD executions here
    baseline_ids: list[int] = field(default_factory=list)
    why: str = ""  # a skipped midpoint: how CMD failed; an undecided one: what moved


@dataclass
class BisectPlan:
    """What ``--dry-run`` shows: the line, what is stored on it, the first probe, the bound on captures."""

    commits: list[str]
    stored: list[str]  # commits of the line (GOOD and BAD excluded) that already have baselines
    first_probe: str | None
    max_probes: int
    command: str  # CMD as the first probe would run it


@dataclass
class BisectResult:
    good: str
    bad: str
    target: Target
    workload: str
    commits: list[str]  # GOOD .. BAD on BAD's first-parent line
    midpoints: list[Midpoint]
    first_bad: str | None
    range: tuple[str, str] | None  # (last like GOOD, first like BAD) when no single commit is singled out
    runs: int  # CMD executions in all
    repeats: int
    between: list[str] = field(default_factory=list)  # the undecided and skipped commits inside the range
    diff: Comparison | None = None  # first_bad's baselines against its parent's
    subjects: dict[str, str] = field(default_factory=dict)
    plan: BisectPlan | None = None  # --dry-run: nothing was run
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        found = self.first_bad[:12] if self.first_bad else (
            f"{self.range[0][:12]}..{self.range[1][:12]}" if self.range else "nothing")
        return f"<BisectResult {self.target.describe()}: {found} after {self.runs} run(s)>"


def line_between(repo_dir: Path | None, good: str, bad: str) -> list[str]:
    """GOOD, then the commits of BAD's first-parent line after it, up to BAD (oldest first); an ``InputError``
    when GOOD is not on that line."""
    from kbase.gitrepo import open_repo, resolve_commit

    repo = open_repo(repo_dir)
    g, b = resolve_commit(repo, good).hexsha, resolve_commit(repo, bad).hexsha
    if g == b:
        raise InputError(f"GOOD and BAD are the same commit ({g[:12]}): nothing to bisect")
    out = subprocess.run(["git", "-C", str(repo.working_tree_dir), "rev-list", "--first-parent", "--parents",
                          f"{g}..{b}", "--"], capture_output=True, timeout=600, stdin=subprocess.DEVNULL, check=False)
    rows = [line.split() for line in out.stdout.decode("ascii", "replace").splitlines() if line.strip()]
    if out.returncode or not rows or len(rows[-1]) < 2 or rows[-1][1] != g:
        raise InputError(f"{good} ({g[:12]}) is not an ancestor of {bad} ({b[:12]}) on its first-parent line: "
                         "GOOD must come before BAD")
    return [g] + [r[0] for r in reversed(rows)]


def _from_steps(settings: Settings, target: Target | None, st: Store) -> tuple[str, str, Target]:
    """GOOD, BAD and the target from ``kbase steps``: the target kernel's step (else the largest step found)."""
    from kbase.analysis.lookup import exact_pattern
    from kbase.api.kernels import steps
    from kbase.comparison.bisect import Target as T
    from kbase.comparison.bisect import TargetKind
    from kbase.policy import name_matches

    found = [s for s in steps(settings, store=st).steps if s.kind == "step"]
    if target is not None and target.kind == TargetKind.KERNEL:
        found = [s for s in found if name_matches(target.pattern, s.name) or name_matches(target.pattern, s.short_name)]
    if not found:
        raise InputError("--from-steps: kbase steps finds no step" + (f" of {target.pattern}" if target else "")
                         + " on this line; name GOOD and BAD")
    s = found[0]
    return s.from_commit, s.to_commit, target or T(TargetKind.KERNEL, exact_pattern(s.name), s.short_name)


def bisect(good: str | None, bad: str | None, settings: Settings | None = None, *, run: str,
           target: Target | None = None, repeats: int = 3, timeout_s: float = 3600.0, dry_run: bool = False,
           from_steps: bool = False, capture_ends: bool = False, store: Store | None = None,
           progress: Callable[[Midpoint], None] | None = None) -> BisectResult:
    """Bisect GOOD..BAD (or the step ``kbase steps`` found) for the commit that changed ``target`` (default: the
    kernel that changed most between GOOD and BAD). ``run``: the capture command, ``{out}`` the profile path.
    ``repeats``: CMD executions at most per midpoint while it stays undecided. ``capture_ends``: capture GOOD and
    BAD with ``run`` too (a short CMD — fewer iterations, one rank — measures another thing than CI's stored
    captures: the ends are then judged on its captures). ``progress``: called with each judged midpoint. Ctrl-C:
    the worktree in use is removed, the snapshots stored so far are kept."""
    from kbase.api.bisect_capture import check_command, command_for
    from kbase.comparison.bisect import conclude, default_target, next_probe, probes_needed, target_moved
    from kbase.gitrepo import describe_commits

    settings = settings or Settings.load()
    check_command(run)
    if repeats < 1:
        raise InputError("must be at least 1", field="repeats", value=repeats)
    if not timeout_s > 0 or not math.isfinite(timeout_s):
        raise InputError("must be a positive number of seconds", field="timeout", value=timeout_s)
    if store is None and not dry_run:
        _must_exist(settings)
    with _store(settings, store, readonly=dry_run) as st:
        settings = with_workload(settings, st.reader)
        if from_steps:
            if good is not None or bad is not None:
                raise InputError("--from-steps takes GOOD and BAD from kbase steps: give neither, or drop it")
            good, bad, target = _from_steps(settings, target, st)
        if good is None or bad is None:
            raise InputError("name GOOD and BAD (revisions with stored baselines), or use --from-steps")
        commits = line_between(settings.repo, good, bad)
        n = len(commits) - 1
        runs = 0
        if capture_ends and not dry_run:
            for end_commit in (commits[0], commits[n]):
                runs += 1
                captured = _capture(end_commit, settings, st, run, timeout_s, 0)
                if isinstance(captured, str):
                    raise InputError(f"--capture-ends: the capture command failed at {end_commit[:12]} ({captured})")
        ends = _compare(commits[0], commits[n], settings, st)
        if ends.result.mismatches:
            raise InputError(f"{good} and {bad} are not comparable ({'; '.join(ends.result.mismatches)}): nothing to "
                             "bisect between them")
        step_noise = _step_noise(settings, st, commits[0]) if target is not None and target.kind == "step" else None
        if target is None:
            target = default_target(ends.result)
            if target is None:
                raise InputError(f"no kernel or op changed beyond its noise between {good} and {bad}: nothing to "
                                 "bisect (name one with --kernel or --op, or use --step)")
        elif not target_moved(ends.result, target, step_noise):
            raise InputError(f"{target.describe()} did not change beyond its noise between {good} and {bad}: "
                             "nothing to bisect")
        stored = st.reader.baselines_at(settings.workload, commits)
        notes = [f"step noise: {step_noise.rel_sd:.2%} per capture ({step_noise.source})"] if step_noise else []
        result = BisectResult(good=commits[0], bad=commits[n], target=target, workload=settings.workload,
                              commits=commits, midpoints=[], first_bad=None, range=None, runs=runs, repeats=repeats,
                              notes=notes)
        verdicts: dict[int, MidpointVerdict] = {}
        if dry_run:
            probe = next_probe(n, verdicts)
            result.plan = BisectPlan(commits, [c for c in commits[1:-1] if c in stored],
                                     commits[probe] if probe is not None else None, probes_needed(n),
                                     command_for(run, Path("<out>")))
            result.subjects = {c: note.subject for c, note in describe_commits(settings.repo, commits).items()}
            return result
        while (i := next_probe(n, verdicts)) is not None:
            mid = _probe(i, commits, stored, settings, st, run, repeats, timeout_s, target, step_noise)
            verdicts[i] = mid.verdict
            result.midpoints.append(mid)
            result.runs += mid.runs
            if progress is not None:
                progress(mid)
        end = conclude(n, verdicts)
        if end.first_bad is not None:
            result.first_bad = commits[end.first_bad]
            result.diff = _compare(commits[end.first_bad - 1], commits[end.first_bad], settings, st)
        elif end.range is not None:
            result.range = (commits[end.range[0]], commits[end.range[1]])
            result.between = [commits[i] for i in sorted(end.undecided + end.skipped)]
        shown = [result.good, result.bad, *(m.commit for m in result.midpoints)]
        result.subjects = {c: note.subject for c, note in describe_commits(settings.repo, shown).items()}
        return result


def _must_exist(settings: Settings) -> None:
    """A bisect needs stored GOOD and BAD: no store is ``NoStoreError`` (exit 2), and none is created."""
    from kbase.errors import KbaseError
    from kbase.store.read.connect import ConnectError
    from kbase.store.schema.errors import NoStoreError

    try:
        with _store(settings, None, readonly=True):
            pass
    except (NoStoreError, ConnectError):
        raise
    except KbaseError:  # anything else (an older schema): the writable open upgrades it or says why
        pass


def _compare(before: str, after: str, settings: Settings, st: Store) -> Comparison:
    from kbase.api.comparing import compare

    return compare(before, after, settings, strict=True, store=st)


def _probe(i: int, commits: list[str], stored: dict, settings: Settings, st: Store, cmd: str, repeats: int,
           timeout_s: float, target: Target, step_noise: StepNoise | None) -> Midpoint:
    """Judge commit ``i``: on its stored baselines when it has comparable ones, else capture it; while undecided,
    capture it again (up to ``repeats`` runs here), its captures pooled as repeats."""
    from kbase.comparison.bisect import MidpointVerdict, judge_midpoint

    commit = commits[i]
    mid = Midpoint(commit=commit, index=i, verdict=MidpointVerdict.SKIPPED, reused=commit in stored,
                   baseline_ids=[int(b.id) for b in stored.get(commit, []) if b.id is not None])
    while True:
        if mid.baseline_ids:
            # the midpoint is the candidate side of both: its repeat captures pool there (a pooled side as the
            # baseline would make one capture of BAD "far fewer iterations", incomparable)
            vs_good, vs_bad = _compare(commits[0], commit, settings, st), _compare(commits[-1], commit, settings, st)
            mismatches = vs_good.result.mismatches + vs_bad.result.mismatches
            if not mismatches:
                mid.verdict = judge_midpoint(vs_good.result, vs_bad.result, target, step_noise)
                if mid.verdict != MidpointVerdict.UNDECIDED or mid.runs >= repeats:
                    return mid
            elif mid.runs:  # what CMD captured does not measure what GOOD and BAD hold
                raise InputError(f"the capture at {commit[:12]} is not comparable with GOOD and BAD ({mismatches[0]}): "
                                 "CMD must capture what they hold (same GPUs and window), or capture them too with "
                                 "--capture-ends")
            else:  # stored, but another measurement (CI's full run against a short CMD): capture it
                mid.reused, mid.baseline_ids = False, []
        elif mid.runs >= repeats or (mid.runs and mid.why):  # a failing build fails again: one try is enough
            return mid
        mid.runs += 1
        captured = _capture(commit, settings, st, cmd, timeout_s, mid.runs)
        if isinstance(captured, str):
            mid.why = captured
            if mid.baseline_ids:  # undecided, and the rerun failed: it stays undecided
                return mid
            mid.verdict = MidpointVerdict.SKIPPED
            continue
        if captured not in mid.baseline_ids:
            mid.baseline_ids.append(captured)


def _capture(commit: str, settings: Settings, st: Store, cmd: str, timeout_s: float, attempt: int) -> int | str:
    """Run CMD at ``commit`` and store its profile as a bisect baseline: the baseline's id, or why it failed."""
    from kbase.api.bisect_capture import run_capture

    with tempfile.TemporaryDirectory(prefix="kbase-bisect-out-") as out_dir:
        captured = run_capture(Path(_top_level(settings)), commit, cmd, Path(out_dir), attempt, timeout_s)
        if captured.profile is None:
            return captured.why
        return _store_capture(captured.profile, commit, settings, st)


def _store_capture(profile: Path, commit: str, settings: Settings, st: Store) -> int | str:
    """Snapshot ``profile`` at ``commit`` as a bisect baseline: its id, or why it could not be read."""
    from kbase.api.capture import snapshot
    from kbase.errors import KbaseError

    try:
        saved = snapshot(profile, settings, rev=commit, kind=BISECT_KIND, store=st)
    except KbaseError as exc:
        return f"its profile could not be stored: {exc}"
    return int(saved.baseline.id or 0)


def _top_level(settings: Settings) -> str:
    from kbase.gitrepo import open_repo

    return str(open_repo(settings.repo).working_tree_dir)


def _step_noise(settings: Settings, st: Store, good: str) -> StepNoise:
    """The step time's run-to-run relative sd (``comparison.bisect.step_noise``) of the step times read first: the
    stored baselines at GOOD and along its first-parent line."""
    from kbase.comparison.bisect import step_noise
    from kbase.gitrepo import first_parents, open_repo

    policy = settings.policy
    line = first_parents(open_repo(settings.repo), good, policy.history_baselines)
    found = st.reader.baselines_at(settings.workload, line)

    def step(b: BaselineRecord) -> float:
        return b.step_wall_ns or (b.window_ns / b.iterations_used if b.iterations_used else math.nan)

    return step_noise([step(b) for b in found.get(good, [])], [[step(b) for b in found.get(c, [])]
                                                               for c in reversed(line)], policy)
