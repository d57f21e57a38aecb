"""The in-memory profile: the contract between the readers and every later stage.

A reader (``read_nsys``, ``read_kineto``) turns a file into a :class:`Profile`; nothing after the
reader knows which format the data came from.

The profile holds plain numpy columns (:class:`KernelColumns`, :class:`RangeColumns`,
:class:`GpuColumns`): the window and leaderboard stages compute on arrays, so ``kbase top`` never
imports pandas. ``profile.kernels``, ``.ranges`` and ``.gpus`` are the same tables as pandas
DataFrames (the HTA-style façade for notebooks and tests), built anew at each call: edit the columns,
not a frame, to change a profile.

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
same for ``launch_tid >> 24``), ``name`` (str), ``kind`` (int8: ``RANGE_ANNOTATION`` an NVTX or user
annotation range, ``RANGE_OP`` a framework op (Kineto ``cpu_op`` / ``Operator``), ``RANGE_MODULE`` a module
scope (Kineto ``python_function`` events named ``nn.Module: X``); the op attribution reads it).

``activities`` — the GPU's other work (:class:`ActivityColumns`: memcpy and memset, one row each, with the
``gpu`` index and the launch call's ``launch_start``/``launch_tid`` as for kernels); ``syncs`` — host calls
blocked on the GPU (:class:`SyncColumns`: ``cudaStreamSynchronize`` and friends, a blocking copy); both empty
when the capture has none. The GPU time budget (``analysis.budget``) reads them.

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
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

KERNEL_COLUMNS = ["start", "end", "gpu", "name", "launch_tid", "launch_start"]
RANGE_COLUMNS = ["start", "end", "tid", "pid", "name"]
GPU_COLUMNS = ["gpu", "pid", "device", "model"]
RANGE_ANNOTATION, RANGE_OP, RANGE_MODULE = 0, 1, 2  # RangeColumns.kind


def name_codes(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct names sorted, as an object array; each name's int32 code into it): ``KernelColumns``'
    ``names`` and ``name``."""
    distinct = sorted(set(names))
    position = {n: i for i, n in enumerate(distinct)}
    return np.array(distinct, dtype=object), np.fromiter((position[n] for n in names), dtype=np.int32,
                                                         count=len(names))


def gpu_bounds(gpu: np.ndarray, n_gpus: int) -> np.ndarray | None:
    """Where the rows of each GPU ``0..n_gpus-1`` begin (``n_gpus + 1`` offsets) when ``gpu`` ascends — the readers
    write a profile's kernels grouped by GPU, so each GPU's rows are one slice — else None (the caller takes its
    path for rows in any order)."""
    if len(gpu) > 1 and not bool((gpu[1:] >= gpu[:-1]).all()):
        return None
    return np.searchsorted(gpu, np.arange(n_gpus + 1))


@dataclass
class KernelColumns:
    """One row per launch; ``name`` holds int32 codes into ``names`` (distinct full names, sorted).
    ``launch_tid``/``launch_start`` are None once a caller has no more use for them (they are 16 bytes
    per launch at the peak of a 10M-launch snapshot)."""

    start: np.ndarray
    end: np.ndarray
    gpu: np.ndarray
    name: np.ndarray
    names: np.ndarray  # object array of str
    launch_tid: np.ndarray | None
    launch_start: np.ndarray | None

    def __len__(self) -> int:
        return len(self.start)

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        names = pd.Categorical.from_codes(self.name, categories=pd.Index(self.names, dtype=object))
        cols: dict[str, Any] = {"start": self.start, "end": self.end, "gpu": self.gpu, "name": names}
        if self.launch_tid is not None and self.launch_start is not None:
            cols["launch_tid"] = self.launch_tid
            cols["launch_start"] = self.launch_start
        return pd.DataFrame(cols, copy=False)


@dataclass
class RangeColumns:
    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray
    pid: np.ndarray
    name: np.ndarray  # object array of str
    kind: np.ndarray | None = None  # int8 RANGE_*; None: every range is an annotation (NVTX)

    def __post_init__(self) -> None:
        if self.kind is None:
            self.kind = np.zeros(len(self.start), dtype=np.int8)

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> RangeColumns:
        z = np.zeros(0, dtype=np.int64)
        return cls(start=z, end=z.copy(), tid=z.copy(), pid=z.copy(), name=np.zeros(0, dtype=object))

    def take(self, rows: np.ndarray) -> RangeColumns:
        """The ranges at ``rows`` (a bool mask or indices)."""
        assert self.kind is not None
        return RangeColumns(start=self.start[rows], end=self.end[rows], tid=self.tid[rows], pid=self.pid[rows],
                            name=self.name[rows], kind=self.kind[rows])

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({"start": self.start, "end": self.end, "tid": self.tid, "pid": self.pid,
                             "name": pd.Series(self.name, dtype=object)})


ACTIVITY_MEMCPY, ACTIVITY_MEMSET = 0, 1  # ActivityColumns.kind


@dataclass
class ActivityColumns:
    """GPU activities other than kernels (memcpy, memset): one row each, times in ns on the capture clock."""

    start: np.ndarray  # int64
    end: np.ndarray  # int64
    gpu: np.ndarray  # int32, index into ``gpus``
    kind: np.ndarray  # int8, ACTIVITY_*
    launch_start: np.ndarray  # int64, CPU start of the call that issued it; -1 when unknown
    launch_tid: np.ndarray  # int64, its thread key; -1 when unknown

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> ActivityColumns:
        z = np.zeros(0, dtype=np.int64)
        return cls(start=z, end=z.copy(), gpu=np.zeros(0, dtype=np.int32), kind=np.zeros(0, dtype=np.int8),
                   launch_start=z.copy(), launch_tid=z.copy())


@dataclass
class SyncColumns:
    """Host calls that block until the GPU catches up (stream/device/event synchronize, a blocking copy)."""

    start: np.ndarray  # int64 ns, CPU clock (the capture clock)
    end: np.ndarray  # int64
    pid: np.ndarray  # int64, the process key (as ``ranges.pid`` and ``launch_tid >> 24``)

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> SyncColumns:
        z = np.zeros(0, dtype=np.int64)
        return cls(start=z, end=z.copy(), pid=z.copy())


@dataclass
class GpuColumns:
    gpu: np.ndarray  # int32
    pid: np.ndarray  # int64
    device: np.ndarray  # int32
    model: list[str]

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({"gpu": self.gpu, "pid": self.pid, "device": self.device,
                             "model": pd.Series(self.model, dtype=object)})


@dataclass
class Profile:
    source: Path
    format: str  # "nsys-sqlite" | "kineto"
    exporter_version: str
    columns: KernelColumns
    range_columns: RangeColumns
    gpu_columns: GpuColumns
    # demangled name -> short name (the export's own base name where it has one)
    short_names: dict[str, str] = field(default_factory=dict)
    # capture clock bounds (ns) when known; otherwise derived from the events
    capture_start: int | None = None
    capture_end: int | None = None
    # facts a reader wants to pass on (e.g. step wall times from Kineto; "notes": every loss)
    extra: dict = field(default_factory=dict)
    activities: ActivityColumns = field(default_factory=ActivityColumns.empty)
    syncs: SyncColumns = field(default_factory=SyncColumns.empty)

    @property
    def kernels(self) -> pd.DataFrame:
        """The launches as a DataFrame (``KERNEL_COLUMNS``; a new frame each call)."""
        return self.columns.to_frame()

    @property
    def ranges(self) -> pd.DataFrame:
        return self.range_columns.to_frame()

    @property
    def gpus(self) -> pd.DataFrame:
        return self.gpu_columns.to_frame()

    @property
    def gpu_models(self) -> list[str]:
        return sorted(set(self.gpu_columns.model))

    @property
    def n_gpus(self) -> int:
        """GPUs that ran at least one kernel (devices listed but idle do not dilute shares)."""
        return int(np.count_nonzero(np.bincount(self.columns.gpu))) if len(self.columns) else 0

    def span(self) -> tuple[int, int]:
        lo = self.capture_start
        hi = self.capture_end
        if lo is None:
            lo = int(self.columns.start.min())
        if hi is None:
            hi = int(self.columns.end.max())
        return lo, hi
