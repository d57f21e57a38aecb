"""``KBASE_SQLITE_PAGES=0``: the nsys reader reads every table through SQLite (ADBC, or sqlite3 for a small
table) instead of decoding the file's pages, with the same result. Every real export and the project's
generated exports are read both ways: the same profile, the same leaderboard columns, and ``kbase top
--format json`` byte for byte (per GPU too)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

import kbase
from kbase.readers import nsys, sqlite_columns, sqlite_pages
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.shared import export_params
from helpers.tiny_export import make_tiny_export

GENERATED = {
    "tiny": None,  # tests/helpers/tiny_export.py: a handful of rows, read by sqlite3 when not decoded
    "2gpu-markers": ExportSpec(n_gpus=2, iterations=4, seed=2),  # past SMALL_TABLE_ROWS: ADBC when not decoded
    "no-nvtx": ExportSpec(n_gpus=2, iterations=3, seed=3, nvtx=False),
    "sliced-start-end": ExportSpec(n_gpus=1, iterations=5, seed=4, marker_event_type=60, start_mid_iteration=True,
                                   slice_cuts_launches=7),
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages-switch")
    out = {"tiny": make_tiny_export(root / "tiny.sqlite", steps=6)}
    for key, spec in GENERATED.items():
        if spec is not None:
            out[key] = generate_export(root / f"{key}.sqlite", spec).path
    return out


def _counting_decoder(monkeypatch) -> list:
    """Every answer of the page decoder from here on (None: not sure, SQLite read the table)."""
    answers: list = []
    decode = sqlite_pages.int_columns

    def counted(*a, **k):
        answers.append(decode(*a, **k))
        return answers[-1]

    monkeypatch.setattr(sqlite_pages, "int_columns", counted)
    return answers


def _both_ways(path, monkeypatch):
    """(profile read from the pages, profile read through SQLite), checking which path each read took."""
    answers = _counting_decoder(monkeypatch)
    monkeypatch.delenv("KBASE_SQLITE_PAGES", raising=False)
    decoded = nsys.read_nsys(path)
    assert len(answers) == 2 and all(a is not None for a in answers), "both tables decode from their pages"
    monkeypatch.setenv("KBASE_SQLITE_PAGES", "0")
    plain = nsys.read_nsys(path)
    assert len(answers) == 2, "KBASE_SQLITE_PAGES=0: the decoder is never asked"
    return decoded, plain


def _assert_same(a, b) -> None:
    for part in ("columns", "gpu_columns", "range_columns"):
        x, y = getattr(a, part), getattr(b, part)
        for field in x.__dataclass_fields__:
            u, v = getattr(x, field), getattr(y, field)
            if isinstance(u, np.ndarray):
                assert u.dtype == v.dtype and np.array_equal(u, v), (part, field)
            else:
                assert u == v, (part, field)
    assert a.extra == b.extra and a.short_names == b.short_names and a.exporter_version == b.exporter_version


def _leaderboard(profile):
    board = kbase.leaderboard(kbase.window(profile, kbase.Settings.load()))
    return {c: board.column(c) for c in board.columns}


def _check(path, monkeypatch) -> None:
    decoded, plain = _both_ways(path, monkeypatch)
    _assert_same(decoded, plain)
    a, b = _leaderboard(decoded), _leaderboard(plain)
    assert list(a) == list(b)
    for col in a:
        assert np.array_equal(a[col], b[col], equal_nan=a[col].dtype.kind == "f"), col
    for args in (["--format", "json", "--limit", "0"], ["--format", "json", "--per-gpu"]):
        monkeypatch.delenv("KBASE_SQLITE_PAGES", raising=False)
        fast = run_kbase("top", path, "--no-store", *args)
        monkeypatch.setenv("KBASE_SQLITE_PAGES", "0")
        slow = run_kbase("top", path, "--no-store", *args)
        assert fast.rc == 0 and slow.rc == 0, (fast, slow)
        assert fast.stdout == slow.stdout and fast.stderr == slow.stderr


@pytest.mark.parametrize("export", export_params())
def test_real_exports_read_the_same_both_ways(export, monkeypatch):
    _check(export, monkeypatch)


@pytest.mark.parametrize("key", list(GENERATED))
def test_generated_exports_read_the_same_both_ways(generated, key, monkeypatch):
    if key == "2gpu-markers":  # large enough that SQLite's path is ADBC in rowid ranges, not sqlite3
        con = sqlite3.connect(generated[key])
        rows = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        con.close()
        assert rows > sqlite_columns.SMALL_TABLE_ROWS
    _check(generated[key], monkeypatch)


@pytest.mark.parametrize("value, on", [("0", False), ("off", False), ("false", False), ("1", True), ("", True),
                                       ("yes", True)])
def test_the_switch_reads_the_environment_at_each_call(monkeypatch, value, on):
    monkeypatch.setenv("KBASE_SQLITE_PAGES", value)
    assert sqlite_pages.enabled() is on
    monkeypatch.delenv("KBASE_SQLITE_PAGES")
    assert sqlite_pages.enabled()
