"""Tables that fit: ``top``, ``diff`` and ``gate`` on the shared exports at 80, 120 and 200 columns — in
a real pseudo-terminal (the width the terminal reports, as a person meets it) and piped with
``COLUMNS``. Every line fits, each row is one line, and every row shows its kernel's name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from rich.cells import cell_len

from helpers.cli import run_kbase
from helpers.shared import KINETO_DIR, NSYS_DIR, REPO, SHARED_SKIP_REASON

WIDTHS = [80, 120, 200]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
A = KINETO_DIR / "v100_resnet50_workers0.pt.trace.json.gz"
B = KINETO_DIR / "v100_resnet50_workers4.pt.trace.json.gz"
H100 = NSYS_DIR / "h100_2gpu_fsdp_t5.sqlite"
CLOVER = NSYS_DIR / "a100_cloverleaf.sqlite"
MMAGIC = NSYS_DIR / "a100_mmagic_vsr.sqlite"


def need(*paths):
    for p in paths:
        if not p.is_file():
            pytest.skip(f"{p} not present: {SHARED_SKIP_REASON}")


def run_in_pty(args: list[str], cols: int, rows: int = 300, timeout: float = 180,
               extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``python -m kbase.cli ARGS`` with stdout and stderr on a pseudo-terminal of ``cols`` columns;
    the screen text (ANSI sequences removed) and the exit code."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "KBASE_DEBUG")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(REPO), **(extra_env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "kbase.cli", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=env, cwd=REPO, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
        if time.monotonic() > deadline:
            proc.kill()
            break
    os.close(master)
    rc = proc.wait(timeout=30)
    text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n").replace("\r", "\n")
    return rc, text


def table_rows(text: str, title: str) -> list[str]:
    """The body lines of the table titled ``title`` (between its rule and the first blank/note line)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rule = next(i for i in range(start, len(lines)) if set(lines[i].strip()) == {"─"})
    body = []
    for line in lines[rule + 1:]:
        if not line.strip() or line.startswith(("hidden at this width", "truncated:", "TC:")) \
                or re.match(r"^\d+ unchanged", line) or line.startswith("gate:"):
            break
        body.append(line)
    return body


def check_screen(text: str, width: int, title: str, n_rows: int, first_col: re.Pattern[str]) -> list[str]:
    for line in text.splitlines():
        assert cell_len(line) <= width, f"line wider than {width}: {line!r}"
    body = table_rows(text, title)
    assert len(body) == n_rows, (len(body), body)  # one line per row: nothing wrapped
    for line in body:
        assert first_col.match(line), line
    return body


def kernel_cells(body: list[str], col: int) -> list[str]:
    return [re.split(r"\s{3,}", line.strip())[col] for line in body]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("export", [H100, CLOVER, MMAGIC], ids=lambda p: p.stem)
def test_top_in_a_pty(export, width):
    need(export)
    rc, text = run_in_pty(["top", str(export), "-n", "15"], width)
    assert rc == 0, text[-2000:]
    body = check_screen(text, width, "Kernel leaderboard", 15, re.compile(r"^\s*\d+\s{3}\S"))
    names = kernel_cells(body, 1)
    assert all(len(n) >= 10 for n in names), names  # every kernel name readable
    assert len(set(names)) == len(names), names  # and told apart
    if width < 200:
        assert "hidden at this width (--wide shows them):" in text


# The leaderboard's four reads first at any width: TC, Count with Avg, Total; Min–Max (one column), %kernel and
# the diagnosis join at 120, then %window, time per iteration, Amdahl and the rest.
READS = ["#", "Kernel", "TC", "Count", "Total", "Avg"]
AT_120 = READS + ["Min–Max", "%kernel", "Diagnosis"]
AT_200 = AT_120 + ["%window", "/iter/GPU", "Amdahl max", "Cat", "Med", "Std"]


def header_cells(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    return re.split(r"\s{2,}", lines[start + 1].strip())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("export", [H100, MMAGIC, A], ids=lambda p: p.stem)
def test_top_columns_in_reading_order(export, width):
    """At 80 columns exactly rank, kernel and the four reads; at 120 the compact Min–Max, %kernel and the
    diagnosis after them; at 200 %window, /iter/GPU, Amdahl and the rest — in that order, in a real terminal."""
    need(export)
    rc, text = run_in_pty(["top", str(export), "-n", "12"], width)
    assert rc == 0, text[-2000:]
    cells = header_cells(text, "Kernel leaderboard")
    if width == 80:
        assert cells == READS, cells
    elif width == 120:
        assert cells[:len(AT_120)] == AT_120 and "Amdahl max" not in cells, cells  # %window next, if room
    else:
        assert cells[:len(AT_200)] == AT_200, cells
    body = table_rows(text, "Kernel leaderboard")
    minmax = [re.search(r"\d[\d.]*–[\d.]+ (?:ns|µs|ms|s)\b", line) for line in body]
    assert width == 80 or all(minmax), body  # one column, one unit: "57.5–306 µs"
    if width >= 120:
        assert any(d in text for d in ("expected", "unhealthy")), text[-3000:]
    if "⚠" in "".join(body):
        assert re.search(r"^⚠ #\d+.*fix", text, re.M), text[-3000:]  # every ⚠ has its prescription under the table


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("pair", [(A, B), (CLOVER, CLOVER)], ids=["resnet-workers0-vs-4", "cloverleaf-self"])
def test_diff_and_gate_in_a_pty(width, pair):
    before, after = pair
    need(before, after)
    rc, text = run_in_pty(["diff", str(before), str(after), "--all"], width)
    assert rc == 0, text[-2000:]
    body = table_rows(text, "Kernel diff")
    check_screen(text, width, "Kernel diff", len(body), re.compile(
        r"^(regressed|below floor|improved|new|gone|swapped|unchanged|within noise|cannot judge)"))
    assert len(body) > 20
    names = kernel_cells(body, 1)
    assert all(len(n) >= 10 for n in names), names
    assert len(set(names)) == len(names), [n for n in names if names.count(n) > 1]
    rc, text = run_in_pty(["gate", str(before), str(after), "--all"], width)
    assert rc in (0, 1), text[-2000:]
    check_screen(text, width, "Kernel diff", len(table_rows(text, "Kernel diff")), re.compile(r"^\w"))
    assert "gate: " in text


@pytest.mark.parametrize("width", WIDTHS)
def test_piped_output_honours_columns(width, monkeypatch):
    need(H100)
    monkeypatch.setenv("COLUMNS", str(width))
    r = run_kbase("top", str(H100), "-n", "12")
    assert r.rc == 0, r
    check_screen(r.stdout, width, "Kernel leaderboard", 12, re.compile(r"^\s*\d+\s{3}\S"))


def test_wide_and_full_names(monkeypatch):
    need(H100)
    monkeypatch.setenv("COLUMNS", "80")
    r = run_kbase("top", str(H100), "-n", "5", "--wide", "--full-names")
    assert r.rc == 0, r
    assert "hidden at this width" not in r.stdout
    assert "void at::native::" in r.stdout and "…" not in "".join(table_rows(r.stdout, "Kernel leaderboard"))
    assert any(cell_len(line) > 80 for line in r.stdout.splitlines())  # asked for: longer than the terminal


@pytest.mark.slow
def test_kineto_read_shows_progress_in_a_pty():
    path = KINETO_DIR / "v100_df_index_resolver.json.gz"
    need(path)
    rc, text = run_in_pty(["top", str(path), "-n", "3"], 100, extra_env={"KBASE_PROGRESS_DELAY": "0"})
    assert rc == 0, text[-2000:]
    assert re.search(r"reading v100_df_index_resolver\.json\.gz .*\d+%", text), text[:2000]
    rc, text = run_in_pty(["top", str(path), "-n", "3", "--quiet"], 100, extra_env={"KBASE_PROGRESS_DELAY": "0"})
    assert rc == 0 and "reading " not in text and len(text.strip().splitlines()) == 1, text
