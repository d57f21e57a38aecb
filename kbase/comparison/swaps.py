"""Algorithm swaps: cuDNN/cuBLAS picking other kernels between two runs is not a kernel regression.

Where both sides know each kernel's op, ``comparison.ops`` judges a swapped op as one unit; this module holds
what goes around it: each kernel's op (its home), the notes on the swapped ops, and the library rule that
judges swaps without op information (baselines stored before op attribution, profiles without op ranges,
kernels launched by no op).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from kbase.display import clip
from kbase.enums import KernelClass
from kbase.units import fmt_delta_pct, fmt_signed_ns

if TYPE_CHECKING:
    from kbase.comparison.ops import OpDiff
    from kbase.policy import Policy

LIBRARY_PICKED = ("tc", "fallback")  # matmul/convolution kernels: cuBLAS/cuDNN choose among many


NO_OP = ""  # the ``op`` of a kernel launched by no op (or of a diff without op information)


def home_ops(names: np.ndarray, by_op: OpDiff | None) -> np.ndarray:
    """Each kernel's op: the op key holding most of its time on either side ("" where none, or no ops known)."""
    out = np.full(len(names), NO_OP, dtype=object)
    if by_op is None:
        return out
    best: dict[str, tuple[float, str]] = {}
    p = by_op.pairs
    for k, op, w in zip(p["kernel"].tolist(), p["op"].tolist(), np.fmax(p["before"], p["after"]).tolist()):
        if op is not None and w > best.get(k, (-1.0, ""))[0]:
            best[k] = (w, op)
    out[:] = [best[n][1] if n in best else NO_OP for n in names.tolist()]
    return out


NOTE_LIMIT = 300  # a note's length in the PR comment: a swap note fits it whole, its verdict first


def op_swap_notes(by_op: OpDiff, rows: dict[str, np.ndarray], limit: int = 5) -> list[str]:
    """One line per reshuffled op (at most ``limit``, the largest first): an algorithm swap judged by op. The
    verdict comes first; the list of its kernels is what gets shorter, so the line fits ``NOTE_LIMIT``."""
    short = dict(zip(rows["name"].tolist(), rows["short_name"].tolist()))
    out = []
    for g in by_op.groups[:limit]:
        ks = [str(short.get(k, k)) for k in g["kernels"]]
        verdict = ("regressed, gated" if g["gated"] else
                   "ignored" if g["ignored"] else
                   KernelClass(g["class"]).label + ("" if g["class"] in (KernelClass.REGRESSED.value,
                                                                       KernelClass.REGRESSED_BELOW_FLOOR.value)
                                                    else ", not gated"))
        mde = g["mde_rel"]
        change = (f"op time {fmt_delta_pct(g['delta_pct'])}"
                  + (f", {g['effect']:+.2%} of the iteration" if math.isfinite(g["effect"]) else "")
                  + (f", MDE {mde:.1%}" if math.isfinite(mde) else ""))
        head = (f"algorithm swap in op {clip(str(g['op']), 80)}: {verdict} ({change}); judged as one op, not per "
                f"kernel: {len(ks)} kernel(s) changed launch counts, appeared, vanished or traded work")
        out.append(head + _kernel_list(ks, NOTE_LIMIT - len(head)))
    if len(by_op.groups) > limit:
        out.append(f"algorithm swap in {len(by_op.groups) - limit} more op(s) (--by op shows them)")
    return out


def _kernel_list(names: list[str], room: int) -> str:
    """`` (a, b, c and 4 more)``: as many of ``names`` as fit ``room`` characters (each cut to 40), else none."""
    names = [clip(n, 40) for n in names]
    for shown in range(min(len(names), 3), 0, -1):
        rest = len(names) - shown
        text = " (" + ", ".join(names[:shown]) + (f" and {rest} more" if rest else "") + ")"
        if len(text) <= room:
            return text
    return ""


def mark_algorithm_swaps(rows: dict[str, np.ndarray], policy: Policy, count_same: np.ndarray,
                          among: np.ndarray | None = None) -> list[str]:
    """Library algorithm swaps are not kernel regressions.

    cuDNN/cuBLAS pick a kernel per call from many candidates (autotuning, heuristics); between two
    runs work moves between matmul/convolution kernels: launch counts change, kernels appear and
    vanish, and per-launch averages shift with the mix of shapes. When the launch-count-driven
    changes among those kernels (plus the new and gone ones) net out below ``swap_net_pct`` of
    their combined time, they are one swap: each row keeps its numbers and says so, and none of
    them fails the gate on its own — the total-time rule still applies. ``count_same``: the after side's
    launches per unit as comparable with the before side's. ``among``: only these kernels (those launched by
    no op, where the ops judge the rest: ``comparison.ops``).
    """
    if not len(rows["name"]):
        return []
    lib = _among(rows["tc_before"], LIBRARY_PICKED) | _among(rows["tc_after"], LIBRARY_PICKED)
    if among is not None:
        lib &= among
    dc = np.abs(count_same - rows["count_before"])
    count_moved = (dc >= 0.5) & (dc >= 0.01 * np.fmax(rows["count_before"], count_same))
    moved = lib & (count_moved | _among(rows["class"], (KernelClass.NEW.value, KernelClass.GONE.value)))
    if moved.sum() < 2:
        return []
    net = float(rows["delta_ns"][moved].sum())
    base = float(rows["before"][lib].sum())
    if not base or abs(net) / base * 100 >= policy.swap_net_pct:
        return []
    rows["swap"][moved] = True
    rows["gated"][moved] = False
    return [f"algorithm swap: not gated per kernel (cuDNN/cuBLAS picked other algorithms): {int(moved.sum())} "
            f"matmul/convolution kernels changed launch counts or appeared/vanished, netting {net / base:+.1%} of "
            f"matmul/convolution time ({fmt_signed_ns(net)} per iteration)"]


def _among(values: np.ndarray, options: tuple[str, ...]) -> np.ndarray:
    """Which of ``values`` (an object column: text, NaN where absent) are one of ``options``."""
    return np.fromiter((v in options for v in values.tolist()), dtype=bool, count=len(values))
