"""The closed vocabularies of kbase: modes, formats, classes and statuses.

``StrEnum`` members compare equal to their string values, so stored rows, JSON documents and
pandas columns keep plain strings while the code names each value once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum


class WindowMode(StrEnum):
    ITERATIONS = "iterations"  # iteration-aligned: marker ranges or an iteration kernel
    TRIM = "trim"  # a time slice of the capture clock (not aligned)
    WHOLE = "whole"  # no marker: the whole capture (not aligned)


class AttributionMode(StrEnum):
    MARKER = "marker"
    KERNEL = "kernel"
    NONE = "none"


class Category(StrEnum):
    COMPUTE = "compute"
    COMMUNICATION = "communication"  # NCCL and friends: not compute
    MEMORY = "memory"


class TcState(StrEnum):
    YES = "tc"  # ✓ uses tensor cores
    FALLBACK = "fallback"  # ⚠ eligible (matmul/conv) but no tensor-core path
    NA = "na"  # - not eligible

    @property
    def symbol(self) -> str:
        return {"tc": "✓", "fallback": "⚠", "na": "-"}[self.value]


# a tensor-core state's symbol by its value, as the tables show it (here, beside the states: a table renderer needs
# it without loading ``analysis.classify``, whose patterns cost a stored diff or gate ~5 ms to compile)
TC_SYMBOL = {s.value: s.symbol for s in TcState}


class KernelClass(StrEnum):
    """What the diff says of a kernel: the machine value (JSON, CSV, stored) and its one display word
    (``label``, every table, sentence, comment, report and notebook), each defined once (``meaning``)."""

    REGRESSED = "regressed"
    # significant, but its effect on the iteration is under the policy's min_effect_pct: shown, never gated
    REGRESSED_BELOW_FLOOR = "regressed_below_floor"
    IMPROVED = "improved"
    NEW = "new"
    GONE = "gone"
    # part of an algorithm swap (cuDNN/cuBLAS picked other kernels): judged with its op (or the library rule), not
    # alone; never "regressed", whatever its own time did
    SWAPPED = "swapped"
    UNCHANGED = "unchanged"
    WITHIN_NOISE = "within_noise"
    # nothing measured its noise (too few launches, no history or repeat captures): not judged either way
    CANNOT_JUDGE = "cannot_judge"

    @property
    def label(self) -> str:
        """The class's word wherever a person reads it: short enough for an 80-column table."""
        return _CLASS_WORDS[self.value][0]

    @property
    def meaning(self) -> str:
        """What the word means, in one line (legends, docs)."""
        return _CLASS_WORDS[self.value][1]


_CLASS_WORDS = {
    "regressed": ("regressed", "slower beyond its noise and every floor: fails the gate"),
    "regressed_below_floor": ("below floor", "slower beyond its noise, but under the gate's min_effect_pct of the "
                                             "iteration: shown, never gated"),
    "improved": ("improved", "faster beyond its noise"),
    "new": ("new", "runs only after (the gate's new_kernel rule applies)"),
    "gone": ("gone", "ran only before"),
    "swapped": ("swapped", "part of an algorithm swap (cuDNN/cuBLAS picked other kernels): judged with its op, "
                           "not alone"),
    "unchanged": ("unchanged", "changed less than unchanged_pct"),
    "within_noise": ("within noise", "changed, but not beyond its noise"),
    "cannot_judge": ("cannot judge", "changed, but nothing measured its noise (too few launches, no history or "
                                     "repeat captures)"),
}


def class_counts(counts: Mapping[str, int], only: Iterable[str] | None = None) -> str:
    """``16 swapped, 5 improved, 29 unchanged``: the classes that have kernels, in the classes' order, each by its
    word (``only``: just these classes)."""
    keep = None if only is None else {str(c) for c in only}
    return ", ".join(f"{counts[c.value]} {c.label}" for c in KernelClass
                     if counts.get(c.value) and (keep is None or c.value in keep))


class Match(StrEnum):
    NAME = "name"
    FAMILY = "family"
    NEW = "new"
    GONE = "gone"


class Confidence(StrEnum):
    OK = "ok"
    LOW = "low"  # too few samples for any test: never a regression, at most a warning


class GateStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCOMPARABLE = "incomparable"
    WARN_ONLY = "warn-only"


class ExitCode:
    """The process exit codes of every command."""

    OK = 0
    REGRESSION = 1
    USAGE = 2  # bad input, usage, missing baseline, incomparable
    INTERNAL = 3


class NewKernelPolicy(StrEnum):
    FAIL = "fail"
    WARN = "warn"


class LeaderboardFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MD = "md"
    BMF = "bmf"  # Bencher Metric Format
    GITHUB_BENCHMARK = "github-benchmark"  # github-action-benchmark's customSmallerIsBetter


class DiffFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MD = "md"
    BMF = "bmf"
    GITHUB_BENCHMARK = "github-benchmark"


class GroupBy(StrEnum):
    """What ``top --by`` / ``diff --by`` put on each row."""

    KERNEL = "kernel"
    OP = "op"  # the op that launched each kernel (``analysis.ops``), its kernels below it


class ListFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


class BudgetFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


class BisectFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


class StepsFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


class HistoryFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"


class ProfileFormat(StrEnum):
    NSYS_SQLITE = "nsys-sqlite"
    NSYS_REP = "nsys-rep"
    KINETO = "kineto"
