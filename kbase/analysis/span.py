"""Whether a capture spans its whole program: the fact that makes two captures without iteration markers one run
each of their program's work, compared per run (``comparison.work``) even when their launch counts differ (a new
block size, a kernel split in two), where a slice cut by a clock from a steady state is compared per
window-second whatever its launch counts.

Decided once, when the window is taken, from what the reader found (``Profile.extra["capture"]``: the export's
capture settings and session, ``readers.nsys_capture``; the Kineto trace's profiler spans and steps) and from the
window's own launches; stored with the baseline (``LeaderboardSummary.capture_span``, ``Baseline.capture_span``).
Three answers, and "unknown":

- ``PROGRAM``: an Nsight Systems capture whose collection began with the program — start trigger ``Immediate``,
  no start delay, nsys launched the process itself, and the program never calls ``cudaProfilerStart``/``Stop`` —
  whose export holds every kernel's launch call, and whose session holds the program's CUDA work with room at
  both ends: its first launch call at least ``EDGE_NS`` after the session began (process start-up, CUDA
  initialisation), its last kernel at least ``EDGE_NS`` before the session stopped (teardown, exit). The real
  whole-program exports of the shared data leave 0.3 s to 5 s at each end. A Kineto trace taken without a
  schedule (``with profile(): ...``: code around code) whose launches all lie in its profiler span.
- ``RANGE``: the program marks its own capture range (``cudaProfilerStart``/``Stop``, a capture-range trigger,
  a Kineto schedule's steps): bounded by code, not by a clock — the same work when the launch counts say so.
- ``SLICE``: cut by a clock or from a longer capture — a ``--trim`` window, a start delay, another trigger (a
  hotkey), kernels running past the session's stop, kernels whose launch calls are not in the export.
- None: the export does not tell (no capture session, activity too close to an edge to tell whether the program
  had started or finished): never a guess, the launch counts decide the unit as without this fact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kbase.units import fmt_ns

if TYPE_CHECKING:
    from kbase.readers.profile import Profile

PROGRAM, RANGE, SLICE = "program", "range", "slice"
EDGE_NS = 10_000_000  # room the program's CUDA work leaves at each end of a whole-program session


@dataclass(frozen=True)
class Span:
    """``kind``: ``PROGRAM``, ``RANGE``, ``SLICE`` or None (the capture does not tell); ``why``: one clause saying
    so."""

    kind: str | None
    why: str


def capture_span(profile: Profile, mask: np.ndarray, *, trimmed: bool, no_launch: int, start_ns: int,
                 end_ns: int) -> Span:
    """The span of the window ``mask`` of ``profile`` (module doc); ``no_launch``: its kernels without their
    launch call in the capture; ``start_ns``/``end_ns``: its first kernel's start and last kernel's end."""
    if trimmed:
        return Span(SLICE, "a --trim window of the capture")
    facts = profile.extra.get("capture")
    if not isinstance(facts, dict):
        return Span(None, "the capture does not say how it began")
    if facts.get("format") == "kineto":
        return _kineto(facts, lambda: _first_call(profile, mask, start_ns), end_ns, no_launch)
    if facts.get("format") == "nsys":
        return _nsys(facts, lambda: _first_call(profile, mask, start_ns), end_ns, no_launch)
    return Span(None, "the capture does not say how it began")


def _first_call(profile: Profile, mask: np.ndarray, start_ns: int) -> int:
    """The window's first launch call, or its first kernel's start where that is earlier; asked only once every
    kernel has its launch call (no -1 to skip), and without a copy of a column (10M launches: 80 MB)."""
    calls = profile.columns.launch_start
    if calls is None:
        return start_ns
    return min(start_ns, int(np.min(calls, where=mask, initial=start_ns)))


def _cut(no_launch: int) -> Span | None:
    if no_launch:
        return Span(SLICE, f"{no_launch} kernel(s) have no launch call in the capture: cut from a longer one")
    return None


def _nsys(facts: dict, first_call: Callable[[], int], last: int, no_launch: int) -> Span:
    trigger, delay, attach = facts.get("trigger"), facts.get("delay_ms"), facts.get("attach")
    if trigger is not None and trigger != "Immediate":
        if any(word in trigger.lower() for word in ("profiler", "nvtx")):
            return Span(RANGE, f"the program marks its capture range (trigger {trigger})")
        return Span(SLICE, f"the capture began on a trigger ({trigger}), not with the program")
    if isinstance(delay, int) and delay > 0:
        return Span(SLICE, f"the capture began {fmt_ns(delay * 1_000_000)} into the program (a start delay)")
    if attach is not None and attach != "LaunchAnother":
        return Span(SLICE, "nsys attached to a running process")
    cut = _cut(no_launch)
    if cut is not None:
        return cut
    if facts.get("profiler_range"):
        return Span(RANGE, "the program calls cudaProfilerStart/Stop: it marks its capture range")
    if not facts.get("sessions"):
        return Span(None, "the export records no capture session")
    first = first_call()
    started = [(lo, hi) for lo, hi in facts["sessions"] if lo <= first <= hi]
    if not started:
        return Span(None, "the export records no session that holds its kernels")
    held = [(first - lo, hi - last) for lo, hi in started if last <= hi]
    if not held:
        return Span(SLICE, "kernels run past the session's stop: it stopped mid-run")
    lead, tail = min(h[0] for h in held), min(h[1] for h in held)
    if lead < EDGE_NS:
        return Span(None, f"the first launch comes {fmt_ns(lead)} after the capture began: too close to tell "
                          "whether it began with the program")
    if tail < EDGE_NS:
        return Span(None, f"the last kernel ends {fmt_ns(tail)} before the capture stopped: too close to tell "
                          "whether the program had finished")
    started_with = "" if trigger is not None else " (no capture settings in the export)"
    return Span(PROGRAM, f"the capture began {fmt_ns(lead)} before the first launch and stopped {fmt_ns(tail)} "
                         f"after the last kernel, every launch call in it{started_with}")


def _kineto(facts: dict, first_call: Callable[[], int], last: int, no_launch: int) -> Span:
    if facts.get("steps"):
        return Span(RANGE, "the profiler ran on a schedule (ProfilerStep#N): some steps of a longer loop")
    cut = _cut(no_launch)
    if cut is not None:
        return cut
    spans = facts.get("trace_spans") or []
    if not spans or any(s is None for s in spans):
        return Span(None, "the trace records no profiler span")
    if first_call() < min(s[0] for s in spans) or last > max(s[1] for s in spans):
        return Span(SLICE, "kernels lie outside the profiler's span: cut from a longer trace")
    return Span(PROGRAM, "the profiler ran around the profiled code without a schedule, every launch in its span")
