"""Issue 29, class 2: no write goes through a link (``kbase.safe_write``).

- Inside the report folder (``kbase report --out rep``) a symbolic link at any entry kbase writes — the
  ``assets/`` folder (to a folder, dangling, to a file), a file in it, a page, the manifest, an old page —
  and a hard link to another file are *replaced*, never followed: the place they point at is byte-identical
  and holds nothing new, and the report is whole.
- The path a user names (``--out`` itself, ``--junit``, ``--output``, ``--comment-md``, ``GITHUB_STEP_SUMMARY``)
  is refused when it is a symbolic link (to a file, a folder, nothing, another link): exit 2, one line, before
  any verdict, nothing written anywhere — except a link to a device or pipe (``/dev/null``), which is written.
- A link swapped in after the check is still refused (``O_NOFOLLOW``): tested on the library directly.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb

REV1, REV2 = "1" * 40, "2" * 40


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sw")
    p = generate_export(d / "p.sqlite", ExportSpec(n_gpus=1, iterations=5, seed=1)).path
    db = d / "s.db"
    for rev in (REV1, REV2):
        assert kb("snapshot", p, "--no-git", "--rev", rev, "--db", db).rc == 0
    return db


@pytest.fixture
def victim(tmp_path) -> Path:
    """A folder standing for a system folder: a file in it that must never change, and nothing added."""
    v = tmp_path / "victim"
    v.mkdir()
    (v / "passwd").write_text("root:x:0:0\n")
    return v


def state(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def report(store: Path, out: Path, *extra: str):
    return kb("report", "--db", store, "--out", out, "-q", *extra)


def assert_whole_report(out: Path) -> None:
    """Every entry kbase writes is a real file (or folder), nothing a link, and the pages name their assets."""
    for p in [out, *out.rglob("*")]:
        assert not p.is_symlink(), p
    assert (out / "assets").is_dir() and (out / "assets" / "report.js").is_file()
    assert (out / "kbase-report.json").is_file() and "assets/report.js" in (out / "index.html").read_text()
    assert not list(out.rglob("*.tmp")), "a temporary file was left behind"


# Links placed in a previous report folder before kbase writes into it again: (entry, what it points at).
INSIDE = {
    "assets -> a folder": ("assets", "victim"),
    "assets -> nothing": ("assets", "victim/missing-dir"),
    "assets -> a file": ("assets", "victim/passwd"),
    "assets/report.js -> a file": ("assets/report.js", "victim/passwd"),
    "assets/plotly -> a folder": ("assets/plotly-basic.min.js", "victim"),
    "assets/LICENSE -> nothing": ("assets/LICENSE.plotly.txt", "victim/new-file"),
    "index.html -> a file": ("index.html", "victim/passwd"),
    "index.html -> nothing": ("index.html", "victim/created-by-kbase"),
    "manifest -> a file": ("kbase-report.json", "victim/passwd"),
    "an old page -> a file": ("kernel-000000000000.html", "victim/passwd"),
    "a link chain": ("index.html", "chain"),
}


@pytest.mark.parametrize("case", list(INSIDE))
def test_links_inside_the_report_folder_are_replaced_never_followed(store, tmp_path, victim, case):
    out = tmp_path / "rep"
    assert report(store, out).rc == 0  # a previous report
    entry, target = INSIDE[case]
    (tmp_path / "chain").symlink_to(victim / "passwd")
    at = out / entry
    if at.is_dir() and not at.is_symlink():
        for p in sorted(at.rglob("*"), reverse=True):
            p.unlink()
        at.rmdir()
    elif at.exists() or at.is_symlink():
        at.unlink()
    at.symlink_to(tmp_path / target)
    before = state(victim)
    r = report(store, out)
    if entry == "kbase-report.json":  # no real manifest: not surely a kbase report, refused (nothing written)
        assert r.rc == 2 and "holds no kbase report" in r.stderr, r
        assert state(victim) == before
        r = report(store, out, "--overwrite")
    assert r.rc == 0, r
    assert state(victim) == before, "something was written through the link"
    assert_whole_report(out)


def test_a_hard_link_inside_the_report_folder_is_replaced(store, tmp_path, victim):
    out = tmp_path / "rep"
    assert report(store, out).rc == 0
    (out / "index.html").unlink()
    os.link(victim / "passwd", out / "index.html")
    before = state(victim)
    assert report(store, out).rc == 0
    assert state(victim) == before and os.stat(out / "index.html").st_nlink == 1
    assert_whole_report(out)


@pytest.mark.parametrize("target", ["a folder", "nothing", "a file"])
def test_the_report_folder_itself_as_a_link_is_refused(store, tmp_path, victim, target):
    link = tmp_path / "rep"
    link.symlink_to({"a folder": victim, "nothing": tmp_path / "missing", "a file": victim / "passwd"}[target])
    before = state(victim)
    r = report(store, link)
    assert r.rc == 2 and r.stdout == "", r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0] and "symbolic link" in lines[0], r
    assert state(victim) == before and not (tmp_path / "missing").exists()


def test_links_above_the_named_folder_are_the_users_own(store, tmp_path):
    """Only what kbase writes *inside* is never followed: the folders above the path the user names are
    followed as the system follows them (``/tmp`` -> ``/private/tmp``, a workspace link)."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "ws").symlink_to(real)
    assert report(store, tmp_path / "ws" / "rep").rc == 0
    assert_whole_report(real / "rep")


# ------------------------------------------------------------------------------------------ single files

FILE_OPTIONS = ["--junit", "--output", "--comment-md", "GITHUB_STEP_SUMMARY"]
LINKS = {
    "link to a file": lambda t, v: (t / "out").symlink_to(v / "passwd"),
    "link to a folder": lambda t, v: (t / "out").symlink_to(v),
    "dangling link": lambda t, v: (t / "out").symlink_to(v / "created-by-kbase"),
    "link to a link": lambda t, v: ((t / "mid").symlink_to(v / "passwd"), (t / "out").symlink_to(t / "mid")),
    "link in a loop": lambda t, v: (t / "out").symlink_to(t / "out"),
}


def gate(store: Path, option: str, path: Path, monkeypatch):
    if option == "GITHUB_STEP_SUMMARY":
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
        return kb("gate", "@1", "@2", "--db", store)
    return kb("gate", "@1", "@2", "--db", store, option, path)


@pytest.mark.parametrize("link", list(LINKS))
@pytest.mark.parametrize("option", FILE_OPTIONS)
def test_an_output_file_that_is_a_link_is_refused_before_the_verdict(store, tmp_path, victim, monkeypatch, option,
                                                                      link):
    LINKS[link](tmp_path, victim)
    before = state(victim)
    r = gate(store, option, tmp_path / "out", monkeypatch)
    assert r.rc == 2 and r.stdout == "" and "PASS" not in r.stderr, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], r
    assert "symbolic link" in lines[0] or "directory" in lines[0], r
    assert state(victim) == before
    assert (tmp_path / "out").is_symlink()  # the user's link is left as it was


@pytest.mark.parametrize("option", FILE_OPTIONS)
def test_devices_and_links_to_them_are_written(store, tmp_path, monkeypatch, option):
    """``/dev/null`` (and a link to it, as ``/dev/stdout`` is one) stands for no file: written, never replaced."""
    (tmp_path / "null").symlink_to("/dev/null")
    for path in (Path("/dev/null"), tmp_path / "null"):
        r = gate(store, option, path, monkeypatch)
        assert r.rc in (0, 1), r
        assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize("option", FILE_OPTIONS)
def test_a_regular_output_file_is_written(store, tmp_path, monkeypatch, option):
    path = tmp_path / "out"
    path.write_text("old\n")
    r = gate(store, option, path, monkeypatch)
    assert r.rc in (0, 1), r
    text = path.read_text()
    assert text.startswith("old\n") == (option == "GITHUB_STEP_SUMMARY")  # the summary is appended to
    assert len(text) > 10


def test_a_link_swapped_in_after_the_check_is_refused(tmp_path, victim, monkeypatch):
    """Race: the check saw a plain path; by the time it is opened it is a link. ``O_NOFOLLOW`` refuses it."""
    import kbase.safe_write as sw
    from kbase.errors import SettingsError

    path = tmp_path / "out"
    monkeypatch.setattr(sw, "check_output_file", lambda p, f: path.symlink_to(victim / "passwd"))
    before = state(victim)
    with pytest.raises(SettingsError, match="symbolic link"):
        sw.write_output_file(path, "x", "junit")
    assert state(victim) == before


def test_a_link_swapped_in_inside_an_open_folder_is_replaced(tmp_path, victim):
    """The folder is opened once: a link made inside it later is replaced by the rename, never followed; a
    folder renamed away and replaced by a link does not redirect the writes (they go to the open folder)."""
    from kbase.safe_write import OutputDir

    out = tmp_path / "rep"
    with OutputDir(out, "out") as d:
        (out / "page.html").symlink_to(victim / "passwd")
        d.write("page.html", "<p>")
        out.rename(tmp_path / "moved")
        out.symlink_to(victim)
        d.write("late.html", "<p>")
    assert (tmp_path / "moved" / "page.html").read_text() == "<p>" and (tmp_path / "moved" / "late.html").is_file()
    assert sorted(p.name for p in victim.iterdir()) == ["passwd"] and (victim / "passwd").read_text() == "root:x:0:0\n"


@pytest.mark.parametrize("entry", ["", "repo", "train_v1.sqlite", "kbase.db", "kbase.db-wal", "train_v2.sqlite-journal"])
def test_the_demo_folder_holds_no_link_it_would_write_through(tmp_path, victim, entry):
    """``kbase demo --dir D``: SQLite and git write its files following links, so none may be one (nor D)."""
    folder = tmp_path / "demo"
    if entry:
        folder.mkdir()
        (folder / entry).symlink_to(victim / "passwd" if "." in entry else victim)
    else:
        folder.symlink_to(victim)
    before = state(victim)
    r = kb("demo", "--dir", folder, "-q")
    assert r.rc == 2 and "--dir" in r.stderr and "symbolic link" in r.stderr, r
    assert len(r.stderr.strip().splitlines()) == 1 and state(victim) == before
