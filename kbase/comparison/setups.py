"""One comparability rule for a workload's history: two baselines measure the same thing when they share their
setup — the comparability fingerprint (GPU model and count, workload, window spec: ``store.codec.fingerprint``,
what ``diff.comparability`` checks field by field) and whether the window is iteration-aligned (per iteration
on one side, per window-second on the other: no common unit).

``kbase steps`` finds steps within each setup, never across one; ``kbase history`` measures its change against
the previous baseline of the same setup and marks the baseline where the setup changes; the report's trend
draws a dotted line there. Each says what changed (``SetupChange.text``). Pure Python: no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class HasSetup(Protocol):
    fingerprint: str
    aligned: bool


UNKNOWN_GPU = "unknown"  # what a baseline stores as its GPU model when the capture does not name it


@dataclass(frozen=True)
class SetupChange:
    """Where the setup changes along a line: the baseline (``index`` in the line, its id and commit) that starts
    another setup than the previous baseline's, and both setups in words."""

    index: int
    baseline_id: int | None
    commit: str
    before: str
    after: str

    @property
    def gpu(self) -> bool:
        """Whether the GPU model/count changed (else the window or its iteration alignment did)."""
        return self.before.split(";")[0] != self.after.split(";")[0]

    @property
    def text(self) -> str:
        where = f"@{self.baseline_id} ({self.commit[:12]})" if self.baseline_id is not None else self.commit[:12]
        return f"{where}: {self.before} -> {self.after}"

    def as_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline_id, "commit": self.commit, "before": self.before, "after": self.after,
                "gpu": self.gpu}


def setup_key(b: Any) -> tuple[str, bool]:
    """The comparability key of a baseline (row, record or dict with ``fingerprint`` and ``aligned``)."""
    get = b.get if isinstance(b, dict) else lambda k: getattr(b, k, None)
    return str(get("fingerprint") or ""), bool(get("aligned"))


def describe(b: Any) -> str:
    """A baseline's setup in words: ``1x Tesla V100-DGXS-32GB`` (``1x unknown GPU`` when the capture did not
    name it), ``; no iteration markers`` for a window that is not iteration-aligned."""
    get = b.get if isinstance(b, dict) else lambda k: getattr(b, k, None)
    models = str(get("gpu_models") or UNKNOWN_GPU)
    gpu = f"{get('gpu_count') or '?'}x {models}" + (" GPU" if models == UNKNOWN_GPU else "")
    return gpu + ("" if get("aligned") else "; no iteration markers")


def setup_changes(line: Sequence[Any]) -> list[SetupChange]:
    """Each baseline of ``line`` (oldest first; of one workload) whose setup differs from the previous one's."""
    out = []
    for i in range(1, len(line)):
        a, b = line[i - 1], line[i]
        if setup_key(a) != setup_key(b):
            before, after = describe(a), describe(b)
            if before == after:  # same GPUs and alignment: the window spec (warm-up, marker, trim) changed
                before, after = f"{before}; window {_window(a)}", f"{after}; window {_window(b)}"
            get = b.get if isinstance(b, dict) else lambda k, b=b: getattr(b, k, None)
            out.append(SetupChange(index=i, baseline_id=get("id"), commit=str(get("commit") or ""),
                                   before=before, after=after))
    return out


def _window(b: Any) -> str:
    get = b.get if isinstance(b, dict) else lambda k: getattr(b, k, None)
    return str(get("window_desc") or get("window_spec") or "another window")


def setup_groups(line: Sequence[Any]) -> list[list[int]]:
    """The positions in ``line`` of each setup's baselines, in line order; the newest baseline's setup last."""
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, b in enumerate(line):
        # (``setup_key``, inline for a row: ``kbase history`` groups 10,000)
        key = (str(b.get("fingerprint") or ""), bool(b.get("aligned"))) if type(b) is dict else setup_key(b)
        groups.setdefault(key, []).append(i)
    newest = setup_key(line[-1]) if line else None
    return sorted(groups.values(), key=lambda g: (setup_key(line[g[0]]) == newest, g[-1]))


def changes_note(changes: Sequence[SetupChange], what: str) -> str | None:
    """One line naming the setup changes (None: none): ``what`` says what is measured within each setup only
    (``steps are found``)."""
    if not changes:
        return None
    shown = "; ".join(c.text for c in changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
    kind = "GPU model/count" if any(c.gpu for c in changes) else "window"
    return (f"the {kind} changes {len(changes)} time(s) along this history ({shown}): {what} within each setup, "
            "never across a change (a capture that does not name its GPU: kbase snapshot --gpu-model records it)")
