"""The in-memory profile: the contract between the readers and every later stage.

A reader (``read_nsys``, ``read_kineto``) turns a file into a :class:`Profile`; nothing after the
reader knows which format the data came from.

``kernels`` — one row per GPU kernel launch:

==============  ========  ==========================================================================
column          dtype     meaning
==============  ========  ==========================================================================
start, end      int64     GPU timestamps, ns, on the capture clock
gpu             int32     index into ``gpus`` (one row per (process, device) pair)
name            category  full demangled kernel name (the exact match key)
launch_tid      int64     thread that issued the launch call (nsys globalTid / Kineto pid<<24|tid);
                          -1 when the launch call is not in the capture
launch_start    int64     CPU start of the launch call, ns on the capture clock; -1 when unknown
==============  ========  ==========================================================================

``ranges`` — CPU annotation ranges (NVTX push/pop and start/end, Kineto user annotations):
``start``, ``end`` (int64 ns; end is -1 for a range that never closed), ``tid`` (int64, same encoding
as ``launch_tid``; -1 for a process-wide range such as an NVTX start/end range, which any thread of
process ``pid`` may launch inside), ``pid`` (int64, the process key: a thread key ``>> 24``, the
same for ``launch_tid >> 24``), ``name`` (str).

``gpus`` — ``gpu`` (int32, the index), ``pid`` (int64 process id), ``device`` (int32 device id in
that process), ``model`` (str, "unknown" when the export does not say).

Nothing a reader leaves out or changes is silent: ``extra["notes"]`` holds one line per loss
(invalid kernel rows excluded, unreadable ranks left out under ``allow_missing_ranks``, ranges
ignored, names with characters no output can carry replaced by U+FFFD). The window copies these
notes, so every output shows them. Kineto profiles also list ``extra["missing_ranks"]``
([{file, reason}]), ``extra["absent_ranks"]`` and ``extra["ignored_files"]``. Every kernel row
satisfies ``start <= end < start + 2**40`` (nsys: ``start >= 0`` too); names are valid Unicode without NUL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

KERNEL_COLUMNS = ["start", "end", "gpu", "name", "launch_tid", "launch_start"]
RANGE_COLUMNS = ["start", "end", "tid", "pid", "name"]
GPU_COLUMNS = ["gpu", "pid", "device", "model"]


@dataclass
class Profile:
    source: Path
    format: str  # "nsys-sqlite" | "kineto"
    exporter_version: str
    kernels: pd.DataFrame
    ranges: pd.DataFrame
    gpus: pd.DataFrame
    # demangled name -> short name (the export's own base name where it has one)
    short_names: dict[str, str] = field(default_factory=dict)
    # capture clock bounds (ns) when known; otherwise derived from the events
    capture_start: int | None = None
    capture_end: int | None = None
    # facts a reader wants to pass on (e.g. step wall times from Kineto; "notes": every loss)
    extra: dict = field(default_factory=dict)

    @property
    def gpu_models(self) -> list[str]:
        return sorted(set(self.gpus["model"].astype(str)))

    @property
    def n_gpus(self) -> int:
        """GPUs that ran at least one kernel (devices listed but idle do not dilute shares)."""
        return int(self.kernels["gpu"].nunique()) if len(self.kernels) else 0

    def span(self) -> tuple[int, int]:
        lo = self.capture_start
        hi = self.capture_end
        if lo is None:
            lo = int(self.kernels["start"].min())
        if hi is None:
            hi = int(self.kernels["end"].max())
        return lo, hi


def empty_ranges() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start": pd.Series(dtype="int64"),
            "end": pd.Series(dtype="int64"),
            "tid": pd.Series(dtype="int64"),
            "pid": pd.Series(dtype="int64"),
            "name": pd.Series(dtype="object"),
        }
    )
