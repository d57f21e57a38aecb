"""``jsonable.dumps`` encodes a list of records in one call and cuts it between records: byte for byte what
encoding each record alone writes, whatever the rows of a history hold (and one call a record when it cannot)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kbase import jsonable
from kbase.comparison.result import KernelHistory
from kbase.render.history import history_doc, history_json


def _row(i: int, **over) -> dict:
    when = datetime(2026, 1, 1, 9, i % 60, tzinfo=UTC)
    row = {"id": i, "commit": f"{i:040x}", "created_at": when, "workload": "w", "branch": "main",
           "commit_date": when, "count": 10 + i, "total_ns": 1000 * i, "avg_ns": 100.5 + i,
           "per_iter_ns": 50.25 * (1 + i % 3), "share_window": 0.125, "fingerprint": "f" if i < 4 else "g",
           "aligned": True, "gpu_models": "H100", "gpu_count": 8, "window_spec": "s", "subject": "fix"}
    row.update(over)
    return row


CASES = {
    "plain": [_row(i) for i in range(1, 8)],
    "DEL and C1 in a subject": [_row(i, subject="a\x7fb\x85c" if i == 3 else "x") for i in range(1, 6)],
    "non-ASCII subject": [_row(i, subject="é 漢" if i == 2 else "x") for i in range(1, 6)],
    "lone surrogate": [_row(i, subject="\ud800" if i == 2 else "x") for i in range(1, 6)],
    "the boundary inside a string": [_row(i, subject='}, {"id": 7' if i == 2 else "x") for i in range(1, 6)],
    "NaN and inf": [_row(i, avg_ns=float("nan") if i == 2 else 1.0, share_window=float("inf")) for i in range(1, 6)],
    "a container in a row": [_row(i, gpu_models=[{"id": 1}, {"id": 2}]) for i in range(1, 6)],
    "another first key": [{"commit": "c", **{k: v for k, v in _row(i).items() if k != "commit"}}
                          for i in range(1, 6)],
    "one row": [_row(1)],
    "none": [],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("limit", [None, 3])
def test_history_json_is_dumps_of_the_doc(case: str, limit: int | None, monkeypatch) -> None:
    h = KernelHistory(query="k\x7f", name="kernel<é>", short_name="kernel", rows=CASES[case], workload="w")
    with monkeypatch.context() as m:  # the reference: each record encoded alone
        m.setattr(jsonable, "_records_text",
                  lambda records, enc, inner: ",\n".join(inner + enc(r) for r in records))
        want = jsonable.dumps(history_doc(h, "w", None, None, limit))
    assert history_json(h, "w", None, None, limit) == want


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("limit", [None, 3])
def test_history_doc_rows_are_with_changes_made_public(case: str, limit: int | None) -> None:
    """The JSON rows, made in one pass, are ``with_changes``' rows without the store's setup keys, dates ISO."""
    from kbase.render.history import with_changes

    rows = CASES[case]
    want = [{k: v.isoformat() if k in ("created_at", "commit_date") else v for k, v in r.items()
             if k not in ("fingerprint", "window_spec")} for r in with_changes(rows)]
    want = want[-limit:] if limit and len(want) > limit else want
    h = KernelHistory(query="k", name="k", short_name="k", rows=rows, workload="w")
    got = history_doc(h, "w", None, None, limit)["baselines"]
    assert [list(r.items()) for r in got] == [list(r.items()) for r in want]
