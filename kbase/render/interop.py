"""Feed other dashboards: Bencher Metric Format and github-action-benchmark's custom JSON.

- **Bencher Metric Format (BMF)** — https://bencher.dev/docs/reference/bencher-metric-format/ and
  https://bencher.dev/docs/how-to/track-custom-benchmarks/ : a JSON object
  ``{benchmark name: {measure: {"value": number, "lower_value"?: number, "upper_value"?: number}}}``
  (JSON schema https://bencher.dev/bmf.json: ``value`` required, all numbers). Benchmark names are at
  most 1,024 characters, measure names or slugs at most 64; a measure named that does not exist yet
  is created. Use with ``bencher run --adapter json --file kbase-bmf.json``.
- **github-action-benchmark ``customSmallerIsBetter``** — README of
  https://github.com/benchmark-action/github-action-benchmark ("Examples for custom benchmarks"): a
  JSON array of ``{"name": str, "unit": str, "value": number, "range"?: str, "extra"?: str}``;
  ``extra`` is shown in the chart's tooltip (newlines allowed). Use with ``tool: customSmallerIsBetter``.

Both carry kernel time per iteration per GPU in nanoseconds (kbase's unit), launches per iteration
and time per launch, for the top kernels and the totals. Output is strict JSON: a non-finite number
is never written (its entry or bound is left out).
"""

from __future__ import annotations

import hashlib
import json
import math

from kbase.enums import KernelClass

BMF_NAME_LIMIT = 1024
MEASURE_TIME = "kernel-ns-per-iteration"
MEASURE_LAUNCHES = "launches-per-iteration"
MEASURE_PER_LAUNCH = "ns-per-launch"
TOTALS = (("kernel", "all kernels"), ("compute", "compute kernels"), ("communication", "communication kernels"),
          ("memory", "memory kernels"), ("iteration_wall", "GPU wall per iteration"))


def _finite(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        if hasattr(x, "item"):  # numpy scalar
            return _finite(x.item())
        return None
    return float(x) if math.isfinite(x) else None


def benchmark_name(workload: str, kernel: str, limit: int = BMF_NAME_LIMIT) -> str:
    """``workload::kernel``, cut to ``limit`` characters with a hash of the full name so two long
    templates that share a prefix stay two benchmarks."""
    name = f"{workload}::{kernel}"
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(kernel.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return name[: limit - 15] + f"… #{digest}"


def _metric(value, low=None, high=None) -> dict | None:
    v = _finite(value)
    if v is None:
        return None
    out = {"value": v}
    lo, hi = _finite(low), _finite(high)
    if lo is not None and hi is not None and lo <= v <= hi:
        out["lower_value"], out["upper_value"] = lo, hi
    return out


def _measures(**metrics) -> dict:
    return {k: m for k, m in metrics.items() if m is not None}


def bmf_from_leaderboard(lb, workload: str, limit: int = 50) -> dict:
    """BMF for one leaderboard (a ``Leaderboard`` or its rows, ``analysis.board``): its top ``limit`` kernels
    (bounds: the lowest and highest iteration) and the total."""
    from kbase.analysis.board import board_of

    b = board_of(lb)
    bounds = b.bounds()
    out: dict[str, dict] = {}
    for r in b.rows[:limit] if limit else b.rows:
        name, per_iter, launches, avg = r["name"], r["per_iter_ns"], r["count_per_iter"], r["avg_ns"]
        lo, hi = bounds.get(name, (None, None))
        m = _measures(**{MEASURE_TIME: _metric(per_iter, lo, hi), MEASURE_LAUNCHES: _metric(launches),
                         MEASURE_PER_LAUNCH: _metric(avg)})
        if m:
            out[benchmark_name(workload, name)] = m
    total = _metric(b.summary.kernel_ns_per_iter)
    if total is not None:
        out[benchmark_name(workload, "(all kernels)")] = {MEASURE_TIME: total}
    return out


def bmf_from_diff(doc: dict, limit: int = 50) -> dict:
    """BMF for the *after* side of a ``kbase.diff/4`` document: every changed kernel and the largest
    others up to ``limit``, and the totals (a diff has no per-iteration bounds)."""
    workload = doc.get("after", {}).get("workload") or "default"
    out: dict[str, dict] = {}
    for r in _diff_rows(doc, limit):
        m = _measures(**{MEASURE_TIME: _metric(r.get("after")), MEASURE_LAUNCHES: _metric(r.get("count_after")),
                         MEASURE_PER_LAUNCH: _metric(r.get("avg_after"))})
        if m:
            out[benchmark_name(workload, r["name"])] = m
    for key, label in TOTALS:
        t = doc.get("totals", {}).get(key)
        total = _metric(t.get("after")) if t else None
        if total is not None:
            out[benchmark_name(workload, f"({label})")] = {MEASURE_TIME: total}
    return out


def _diff_rows(doc: dict, limit: int) -> list[dict]:
    # gone kernels (a swapped one too: ``match``) have no after value
    rows = [r for r in doc.get("kernels", []) if "gone" not in (r["class"], r.get("match"))]
    changed = [r for r in rows if r["class"] in ("regressed", "improved", "new", "swapped")]
    rest = sorted((r for r in rows if r not in changed), key=lambda r: -(_finite(r.get("after")) or 0.0))
    return (changed + rest)[: max(limit, len(changed))]


def _word(cls: str) -> str:
    """A class as people read it (``KernelClass.label``)."""
    return KernelClass(cls).label if cls in KernelClass._value2member_map_ else str(cls)


def gab_from_leaderboard(lb, workload: str, limit: int = 30) -> list[dict]:
    """github-action-benchmark ``customSmallerIsBetter`` entries for one leaderboard."""
    from kbase.analysis.board import board_of

    b = board_of(lb)
    bounds = b.bounds()
    out = []
    for r in b.rows[:limit] if limit else b.rows:
        name, short, cat, tc, per_iter, launches, avg = (r[c] for c in ("name", "short_name", "category", "tc",
                                                                         "per_iter_ns", "count_per_iter", "avg_ns"))
        v = _finite(per_iter)
        if v is None:
            continue
        entry = {"name": benchmark_name(workload, name, 256), "unit": "ns/iter/GPU", "value": v,
                 "extra": _extra(short, cat, tc, launches, avg)}
        lo, hi = bounds.get(name, (None, None))
        if lo is not None and hi is not None:
            entry["range"] = f"± {(hi - lo) / 2:.0f}"
        out.append(entry)
    total = _finite(b.summary.kernel_ns_per_iter)
    if total is not None:
        out.append({"name": benchmark_name(workload, "(all kernels)", 256), "unit": "ns/iter/GPU", "value": total})
    return out


def gab_from_diff(doc: dict, limit: int = 30) -> list[dict]:
    """github-action-benchmark ``customSmallerIsBetter`` entries for the *after* side of a diff."""
    workload = doc.get("after", {}).get("workload") or "default"
    out = []
    for r in _diff_rows(doc, limit):
        v = _finite(r.get("after"))
        if v is None:
            continue
        extra = _extra(r["short_name"], r.get("category"), r.get("tc_after"), r.get("count_after"), r.get("avg_after"))
        extra += f"\n{_word(r['class'])}: {r.get('diagnosis') or ''}"
        out.append({"name": benchmark_name(workload, r["name"], 256), "unit": "ns/iter/GPU", "value": v,
                    "extra": extra})
    for key, label in TOTALS:
        t = doc.get("totals", {}).get(key)
        v = _finite(t.get("after")) if t else None
        if v is not None:
            out.append({"name": benchmark_name(workload, f"({label})", 256), "unit": "ns/iter/GPU", "value": v})
    return out


def _extra(short, category, tc, launches, avg) -> str:
    lines = [f"kernel: {short}", f"category: {category or '-'}, tensor cores: {tc or '-'}"]
    n, a = _finite(launches), _finite(avg)
    if n is not None:
        lines.append(f"launches per iteration per GPU: {n:.1f}")
    if a is not None:
        lines.append(f"time per launch: {a:.0f} ns")
    return "\n".join(lines)


def dumps_strict(value) -> str:
    """Strict JSON text (``allow_nan=False``: raises rather than writing NaN or Infinity)."""
    from kbase.render.safe import json_safe

    return json_safe(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"
