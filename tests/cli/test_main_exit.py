"""The ``kbase`` script's quick exit (``kbase.cli.tuning.leave``): output complete and exit codes kept when it
leaves with ``os._exit``, and the ordinary exit whenever that would not be safe."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kbase.cli.tuning import leave


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith("KBASE_")} | (env or {})
    return subprocess.run([sys.executable, "-m", "kbase.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env=full, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, Path]:
    from kbase.store import open_store
    from kbase.synth.history import write_bulk_history

    root = tmp_path_factory.mktemp("exit")
    url = f"sqlite:///{root / 'kb.db'}"
    st = open_store(url)
    try:
        write_bulk_history(st.engine, 300, workload="bulk", n_kernels=4, iterations=3)
    finally:
        st.close()
    return url, root


@pytest.mark.parametrize("fast", [True, False])
def test_piped_output_is_complete_and_the_store_closed(store, fast):
    url, root = store
    p = _run("list", "-n", "0", "--format", "json", "--db", url, cwd=root,
             env=None if fast else {"KBASE_NO_FAST_EXIT": "1"})
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)["baselines"]) == 300  # every byte of ~250 KB arrived
    assert not Path(str(root / "kb.db") + "-wal").exists() or (root / "kb.db-wal").stat().st_size == 0


@pytest.mark.slow
def test_exit_codes_survive_the_quick_exit(store):
    url, root = store
    assert _run("--version", cwd=root).returncode == 0
    bad = _run("no-such-command", cwd=root)
    assert bad.returncode == 2 and bad.stderr.startswith("kbase: error:")
    missing = _run("show", "@99999", "--db", url, cwd=root)
    assert missing.returncode == 2 and "@99999" in missing.stderr


def test_leave_takes_the_ordinary_exit_when_not_safe(monkeypatch):
    monkeypatch.setenv("KBASE_NO_FAST_EXIT", "1")
    with pytest.raises(SystemExit) as exc:
        leave(3)
    assert exc.value.code == 3
    monkeypatch.delenv("KBASE_NO_FAST_EXIT")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        with pytest.raises(SystemExit) as exc:  # another thread still running: let the interpreter finish it
            leave(1)
        assert exc.value.code == 1
    finally:
        stop.set()
        t.join()
