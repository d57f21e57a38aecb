"""The diff document's kernel rows and op list are built column-wise and are not walked by ``jsonable.clean``
(``render.diff.diff_doc``): they must be what the per-value walk made of them — the same values of the same types,
NaN and inf as null — or the JSON (and every renderer reading the document) would change."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kbase import jsonable
from kbase.analysis import columns as registry
from kbase.comparison.diff import compute_diff
from kbase.comparison.resolve import Resolved
from kbase.comparison.result import Comparison
from kbase.comparison.side import side_from_captures, unit_of
from kbase.enums import KernelClass
from kbase.render import diff as render_diff
from kbase.render.diff_sentences import amdahl_text, diagnosis
from kbase.synth.fresh import FreshSpec, process, workload


def _same(a: Any, b: Any, path: str = "doc") -> None:
    """Equal, and of the same type all the way down (``1 == 1.0 == True`` would hide a changed JSON text)."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b or (a != a and b != b), (path, a, b)


def _comparison() -> Comparison:
    """Two processes of a generated workload with ops, one kernel gone and one new (null Δ%, NaN sides)."""
    w = workload(FreshSpec(seed=5))
    before, after = side_from_captures([process(w, 0)], "a"), side_from_captures([process(w, 1)], "b")
    result = compute_diff(before, after)
    t = result.table
    t["delta_pct"][0] = math.inf  # as a kernel new on the after side has it
    t["z"][1] = math.nan
    return Comparison(result=result, before=Resolved(before, None), after=Resolved(after, None))


def test_kernel_rows_are_the_per_value_rows():
    c = _comparison()
    doc = render_diff.diff_doc(c)
    unit = unit_of(c.result.totals.unit)
    own = [k for k in registry.diff_json_fields() if k not in ("diagnosis", "amdahl")]
    want = []
    for r in c.result.records():  # the rows as they were made before: one value at a time
        row = {k: render_diff._num(r.get(k)) for k in own}
        row["class"] = KernelClass(r["class"]).value
        row["diagnosis"] = diagnosis(r, unit)
        row["amdahl"] = amdahl_text(r, unit)
        want.append(row)
    _same(doc["kernels"], want)
    assert doc["kernels"][0]["delta_pct"] is None and doc["kernels"][1]["z"] is None
    _same(doc["kernels"], jsonable.clean(doc["kernels"]))


def test_the_op_list_is_json_values_as_it_is():
    c = _comparison()
    assert c.result.ops is not None and len(c.result.ops)
    doc = render_diff.diff_doc(c)
    assert any(r["kernel_rows"] for r in doc["ops"])
    _same(doc["ops"], jsonable.clean(doc["ops"]))


def test_a_json_column_nulls_what_is_not_finite():
    col = render_diff._json_column
    _same(col(np.array([1.5, np.nan, np.inf, -np.inf]), 4), [1.5, None, None, None])
    _same(col(np.array([1, 2], dtype=np.int64), 2), [1, 2])
    _same(col(np.array([True, False]), 2), [True, False])
    _same(col(np.array(["x", None, np.nan], dtype=object), 3), ["x", None, None])
    _same(col(None, 2), [None, None])
