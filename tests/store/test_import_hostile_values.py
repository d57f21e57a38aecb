"""``kbase import`` as a hostile boundary, values: values of the wrong type, length or range, JSON that is not strict
and nesting past any real file's are refused in one line naming the file, exit 2, before the store is opened (so a
refused import neither changes nor creates a store); what is accepted reads back.

Every case runs against a store on each backend (``store_url``: SQLite, and PostgreSQL where a server can be had): a
refusal is the same line on both, word for word, and leaves either store exactly as it was; a value at the edge of
what the schema allows is accepted by both, reads back, imports again as already stored and exports to the same
bytes. The world (``exported``, in ``conftest.py``): one real snapshot exported; each case rewrites that export
file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.hostile_exports import join, place, refused, split
from helpers.kineto_traces import make_trace

# ------------------------------------------------------------------------------------------ values


def redigest(header: dict, blobs: list[bytes | None]) -> dict:
    """``header`` with the content digest its data gives (when it can be computed): a case is refused for its
    value, not for a stale digest."""
    from kbase.store.transfer.export_files import BLOBS, content_digest

    try:
        by = dict(zip(BLOBS, blobs, strict=True))
        header["content"] = content_digest(header["baseline"], [n[0] for n in header["names"]], by,
                                           header.get("op_names", []))
    except Exception:  # noqa: BLE001 - a value the digest cannot take (NaN, a list): the old digest stays
        pass
    return header


def _row(**changes):
    def edit(header):
        header["baseline"] = {**header["baseline"], **changes}
    return edit


def _names(i: int, j: int, value):
    def edit(header):
        header["names"] = [list(n) for n in header["names"]]
        header["names"][i][j] = value
    return edit


def _incompressible(size: int) -> str:
    """Text of exactly ``size`` UTF-8 bytes that no compressor shrinks (PostgreSQL compresses index entries):
    random CJK characters (3 bytes each) and ASCII letters for the rest."""
    import random

    r = random.Random(size)
    text = "".join(chr(r.randrange(0x4E00, 0x9FFF)) for _ in range(size // 3))
    return text + "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(size - 3 * (size // 3)))


def _header(**changes):
    def edit(header):
        header.update(changes)
    return edit


# (what is edited, words the refusal says): each row a value the store's schema (docs/export-format.md) forbids
ROW_CASES = {
    "int as text": (_row(gpu_count="8"), "gpu_count is not an integer"),
    "bool as int": (_row(aligned=1), "aligned is not true or false"),
    "int as bool": (_row(iterations_used=True), "iterations_used is not an integer"),
    "int32 overflow": (_row(gpu_count=1 << 40), "gpu_count (1099511627776) is out of range"),
    "int64 overflow": (_row(window_ns=1 << 70), "window_ns"),
    "float as text": (_row(step_wall_ns="1.5"), "step_wall_ns is not a finite number"),
    "list as key": (_row(workload=["train"]), "workload is not text"),
    "object as key": (_row(capture_copy={"n": 0}), "capture_copy is not an integer"),
    "null in a required column": (_row(source_name=None), "source_name is missing"),
    "text over its length": (_row(commit="a" * 65), "commit is 65 characters, over the store's 64"),
    "NUL in text": (_row(host="ci\x00runner"), "host holds a NUL character"),
    "lone surrogate": (_row(note="\ud800"), "note is not valid Unicode"),
    "time not ISO": (_row(created_at="yesterday"), "created_at is not an ISO 8601 time"),
    "time without zone": (_row(commit_date="2026-01-01T00:00:00"), "commit_date has no time zone"),
    "summary not an object": (_row(summary_json="[1]"), "summary_json does not have the shape"),
    "summary field mistyped": (_row(summary_json='{"gpus": "eight"}'), "summary_json does not have the shape"),
    "summary with NaN": (_row(summary_json='{"busy_share": NaN}'), "summary_json holds NaN"),
    "summary not JSON": (_row(summary_json="{"), "unreadable baseline summary_json"),
    "iteration keys not ints": (_row(iteration_keys="[1.5]"), "iteration_keys does not have the shape"),
    "tags not a list": (_row(tags='{"a": 1}'), "tags does not have the shape"),
    "capture span unknown": (_row(capture_span="everything"), "capture_span is 'everything', not 'program'"),
    "capture span not the summary's": (_row(capture_span="program"), "capture_span differs from its summary_json's"),
    "name not text": (_names(0, 0, 5), "names[0] name is not text"),
    "category over its length": (_names(0, 3, "x" * 17), "names[0] category is 17 characters"),
    "kernels as bool": (_header(kernels=True), "kernels"),
    "kernels out of range": (_header(kernels=1 << 40), "kernels"),
    "kernel format 0": (_header(kernels_format=0), "kernel data of format 0"),
    # found holding the two backends side by side (issue 39): each imported into one and not the other, or
    # imported once and then conflicted with itself (the store kept another value than the digest covers)
    "window past the index": (_row(window_spec=_incompressible(1025)),
                              "window_spec is 1,025 bytes, over the 1,024 a store's index keeps"),
    # SQLite took it; PostgreSQL refused it at the insert ("index row requires 9128 bytes"), naming the store
    "window PostgreSQL's index refuses": (_row(window_spec=_incompressible(9000)), "window_spec is 9,000 bytes"),
    "time not in UTC": (_row(commit_date="2026-01-01T00:00:00+05:30"), "commit_date is not written as kbase"),
    "time with Z": (_row(commit_date="2026-01-01T00:00:00Z"), "commit_date is not written as kbase"),
    "time past year 9999 in UTC": (_row(created_at="9999-12-31T23:00:00-05:00"), "out of range in UTC"),
    "time before year 1 in UTC": (_row(commit_date="0001-01-01T00:30:00+01:00"), "out of range in UTC"),
    "float as int": (_row(step_wall_ns=4), "step_wall_ns is an integer (4) where the store keeps a float"),
    "negative zero": (_row(step_wall_ns=-0.0), "step_wall_ns is -0.0, which SQLite keeps as 0.0"),
    "summary number past float": (_row(summary_json='{"busy_share": 1e400}'), "summary_json holds 1e400"),
}


@pytest.mark.parametrize("case", list(ROW_CASES))
def test_a_value_the_store_cannot_hold_is_refused_naming_the_file(exported, tmp_path, case, store_url):
    repo, data = exported
    edit, words = ROW_CASES[case]
    header, blobs = split(data)
    edit(header)
    path = place(tmp_path / "data", join(redigest(header, blobs), blobs))
    refused(repo, tmp_path / "data", path, words, url=store_url)


def _raw_header(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data
    return data.replace(old, new, 1)


@pytest.mark.parametrize("case", ["deep", "nan", "infinity", "past float"])
def test_json_that_is_not_strict_or_nests_too_deeply_is_refused(exported, tmp_path, case, store_url):
    repo, data = exported
    value = {"deep": b"[" * 100_000 + b"]" * 100_000, "nan": b"NaN", "infinity": b"-Infinity",
             "past float": b"-1e999"}[case]
    hostile = _raw_header(data, b'"baseline":{', b'"extra":' + value + b',"baseline":{')
    path = place(tmp_path / "data", hostile)
    refused(repo, tmp_path / "data", path, "nested too deeply" if case == "deep" else "not a number JSON allows",
            url=store_url)


TOMBSTONE_KEY = {"workload": "train", "commit": "a" * 40, "source_sha256": "b" * 64, "window_spec": "w",
                 "capture_copy": 0}


SMALL_CASES = {
    "tombstone key a list": (".deleted", {"format": "kbase.tombstone/1", "content": "c",
                                          "key": {**TOMBSTONE_KEY, "workload": ["train"]}}, "workload is not text"),
    "tombstone copy as text": (".deleted", {"format": "kbase.tombstone/1", "content": "c",
                                            "key": {**TOMBSTONE_KEY, "capture_copy": "0"}},
                               "capture_copy is not an integer"),
    "tombstone deep": (".deleted", None, "nested too deeply"),
    "acceptance naive time": (".acceptance", {"format": "kbase.acceptance/1", "workload": "train", "pattern": "*x*",
                                              "commit": "a" * 40, "reason": "r", "author": "", "expires": None,
                                              "created_at": "2026-01-01T00:00:00"}, "created_at has no time zone"),
    "acceptance long workload": (".acceptance", {"format": "kbase.acceptance/1", "workload": "w" * 201,
                                                 "pattern": "*x*", "commit": "a" * 40, "reason": "r", "author": "",
                                                 "expires": None, "created_at": "2026-01-01T00:00:00+00:00"},
                                 "workload is 201 characters"),
    "acceptance bad date": (".acceptance", {"format": "kbase.acceptance/1", "workload": "train", "pattern": "*x*",
                                            "commit": "a" * 40, "reason": "r", "author": "", "expires": "soon",
                                            "created_at": "2026-01-01T00:00:00+00:00"}, "expires is not an ISO 8601"),
    "acceptance catastrophic regex": (".acceptance", {"format": "kbase.acceptance/1", "workload": "train",
                                                      "pattern": "/(?=a)(a+)+b/", "commit": "a" * 40, "reason": "r",
                                                      "author": "", "expires": None,
                                                      "created_at": "2026-01-01T00:00:00+00:00"}, "linear time"),
    "acceptance time past year 9999 in UTC": (".acceptance", {
        "format": "kbase.acceptance/1", "workload": "train", "pattern": "*x*", "commit": "a" * 40, "reason": "r",
        "author": "", "expires": None, "created_at": "9999-12-31T23:59:59-01:00"}, "created_at (9999-12-31T23"),
    "acceptance date not as written": (".acceptance", {
        "format": "kbase.acceptance/1", "workload": "train", "pattern": "*x*", "commit": "a" * 40, "reason": "r",
        "author": "", "expires": "20270131", "created_at": "2026-01-01T00:00:00+00:00"},
        "expires is not written as kbase writes it"),
    "tombstone window past the index": (".deleted", {"format": "kbase.tombstone/1", "content": "c",
                                                     "key": {**TOMBSTONE_KEY, "window_spec": "w" * 1025}},
                                        "window_spec is 1,025 bytes"),
}


@pytest.mark.parametrize("case", list(SMALL_CASES))
def test_tombstones_and_acceptances_are_typed(exported, tmp_path, case, store_url):
    repo, _ = exported
    suffix, doc, words = SMALL_CASES[case]
    data = (b'{"format": "kbase.tombstone/1", "key": ' + b"[" * 50_000 + b"]" * 50_000 + b"}" if doc is None
            else json.dumps(doc).encode())
    path = place(tmp_path / "data", data, suffix)
    refused(repo, tmp_path / "data", path, words, url=store_url)


def test_a_valid_export_imports_and_reads_back(exported, tmp_path, store_url):
    """The control: the unedited file (digest recomputed by the test's helper too) imports, and lists."""
    repo, data = exported
    header, blobs = split(data)
    rebuilt = join(redigest(header, blobs), blobs)
    assert rebuilt == data
    folder = tmp_path / "data"
    place(folder, rebuilt)
    _accepted(repo, folder, store_url)


def _accepted(repo: Path, folder: Path, url: str) -> None:
    """``folder`` imports into ``url``, lists, imports again as already there, and exports to the same bytes."""
    r = run_kbase("import", folder, "--db", url, "--repo", repo)
    assert r.rc == 0, r
    r = run_kbase("list", "--db", url, "--repo", repo, "--format", "json")
    assert r.rc == 0 and json.loads(r.stdout), r
    again = run_kbase("import", folder, "--db", url, "--repo", repo)
    assert again.rc == 0 and "0 new baseline(s)" in again.stderr and "0 new acceptance(s)" in again.stderr, again
    back = folder.parent / "back"
    r = run_kbase("export", back, "--db", url, "--repo", repo)
    assert r.rc == 0, r
    assert {p.name: p.read_bytes() for p in back.iterdir()} == {p.name: p.read_bytes() for p in folder.iterdir()}


_EDGE_ACCEPTANCE = {"format": "kbase.acceptance/1", "workload": "\U0001f600" * 200, "pattern": "*" + "x" * 5000,
                    "commit": "f" * 64, "reason": "\u2028\ufeff\x01 " * 100, "author": "\U0001f600" * 300,
                    "expires": "9999-12-31", "created_at": "9999-12-31T23:59:59.999999+00:00"}


# values at the edge of what the schema allows: each is taken by both stores, reads back and exports as written
ACCEPT_CASES = {
    # the capture key's unique index at its widest: every text of it at its limit, in 4-byte characters
    "window at the index's limit": _row(window_spec=_incompressible(1024), workload="\U0001f600" * 200,
                                        commit="\U0001f600" * 64, source_sha256="\U0001f600" * 64),
    "texts at their length in 4-byte characters": _row(workload="\U0001f600" * 200, host="\U0001f600" * 300,
                                                       branch="\U0001f600" * 300, kbase_version="\U0001f600" * 32),
    "integers at their range": _row(gpu_count=-(1 << 31), capture_copy=(1 << 31) - 1, source_size=(1 << 63) - 1,
                                    window_ns=-(1 << 63)),
    "floats at their range": _row(step_wall_ns=5e-324, step_ns=1.7976931348623157e308, idle_ns=-2.5e-308),
    "controls and separators in text": _row(note="\x01\x1b[31m\x7f\u2028\u2029\ufeff\U0010ffff", tags='["\\u0001"]'),
    "times at their range, microseconds": _row(commit_date="0001-01-01T00:00:00+00:00",
                                               created_at="9999-12-31T23:59:59.999999+00:00"),
    "a kernel name of 60,000 characters": _names(0, 0, _incompressible(60_000)),
    "an acceptance at every limit": None,
}


@pytest.mark.parametrize("case", list(ACCEPT_CASES))
def test_a_value_at_the_schemas_edge_is_taken_by_both_stores(exported, tmp_path, case, store_url):
    repo, data = exported
    folder = tmp_path / "data"
    if ACCEPT_CASES[case] is None:
        from kbase.store.transfer.export_files import acceptance_bytes, row_values

        place(folder, acceptance_bytes(row_values(_EDGE_ACCEPTANCE, ("created_at",), ("expires",))), ".acceptance")
    else:
        header, blobs = split(data)
        ACCEPT_CASES[case](header)
        place(folder, join(redigest(header, blobs), blobs))
    _accepted(repo, folder, store_url)


def test_a_window_past_the_index_is_refused_where_it_is_made_too(exported, tmp_path):
    """The window description's bound holds where one is made: a ``--marker`` (or ``--iteration-kernel``)
    whose description passes it is one line naming the option before anything is read or stored, so no store
    holds a baseline another store refuses."""
    repo, _ = exported
    trace = make_trace(tmp_path / "rank0.pt.trace.json", rank=0, world=1)
    db = tmp_path / "s.db"
    for option in ("--marker", "--iteration-kernel"):
        r = run_kbase("snapshot", trace, option, _incompressible(1200), "--db", f"sqlite:///{db}", "--repo", repo,
                      "--name", "train")
        assert r.rc == 2 and len(r.stderr.strip().splitlines()) == 1, r
        assert option in r.stderr and "is too long" in r.stderr and "1,024" in r.stderr, r
        assert not db.exists()
