"""The command line's numpy CPU policy (``kbase.cli.tuning.sort_without_avx512_on_zen4``): on AMD Zen 4 numpy
leaves out its AVX-512 targets (its AVX-512 sort runs microcoded there), named exactly as the installed numpy
names them, so that numpy imports cleanly even under ``-W error``; other CPUs, unknown numpy releases and a
user's own setting are left alone. Each import runs in a fresh interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbase.cli import tuning

from helpers.shared import REPO

FLAGS = "fpu vme sse sse2 avx avx2 bmi2"


def _cpuinfo(tmp_path, vendor: str, family: int, avx512: bool, cpus: int = 2):
    block = (f"processor\t: {{n}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 17\n"
             f"flags\t\t: {FLAGS}{' avx512f avx512dq avx512bw avx512vl' if avx512 else ''}\n")
    path = tmp_path / "cpuinfo"
    path.write_text("\n".join(block.format(n=n) for n in range(cpus)))
    return path


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("NPY_DISABLE_CPU_FEATURES", raising=False)
    monkeypatch.delenv("NPY_ENABLE_CPU_FEATURES", raising=False)


def _decided(path) -> str | None:
    tuning.sort_without_avx512_on_zen4(str(path))
    return os.environ.get("NPY_DISABLE_CPU_FEATURES")


def test_zen4_leaves_out_the_avx512_targets_of_the_installed_numpy(tmp_path, clean_env):
    release = tuning._numpy_release()
    targets = _decided(_cpuinfo(tmp_path, "AuthenticAMD", 25, avx512=True))
    if release not in tuning._AVX512_TARGETS:
        assert targets is None
        pytest.skip(f"numpy {release}: its target names are not known, so it is left alone")
    assert targets == tuning._AVX512_TARGETS[release]
    if not _has_avx512():
        pytest.skip("this machine has no AVX-512: numpy cannot be shown leaving it out")
    # numpy accepts every name (an unknown one is an ImportWarning: an error here) and drops AVX-512, not AVX2
    probe = ("import json; from numpy._core._multiarray_umath import __cpu_features__ as f; "
             "print(json.dumps([f['AVX512_SKX'], f['AVX2']]))")
    env = {k: v for k, v in os.environ.items() if k != "NPY_ENABLE_CPU_FEATURES"} | {"PYTHONWARNINGS": "error"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [False, True]


def _has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            return "avx512f" in fh.read(16384).split()
    except OSError:
        return False


@pytest.mark.parametrize(("vendor", "family", "avx512"), [
    ("GenuineIntel", 6, True),  # Intel: its AVX-512 sort is its fastest
    ("AuthenticAMD", 25, False),  # Zen 3: no AVX-512
    ("AuthenticAMD", 26, True),  # Zen 5: compress-store fixed
])
def test_other_cpus_are_left_alone(tmp_path, clean_env, vendor, family, avx512):
    assert _decided(_cpuinfo(tmp_path, vendor, family, avx512)) is None


def test_a_users_setting_stands_and_an_unreadable_cpuinfo_changes_nothing(tmp_path, clean_env, monkeypatch):
    zen4 = _cpuinfo(tmp_path, "AuthenticAMD", 25, avx512=True)
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "")  # empty: numpy's own choice, kept
    assert _decided(zen4) == ""
    monkeypatch.delenv("NPY_DISABLE_CPU_FEATURES")
    monkeypatch.setenv("NPY_ENABLE_CPU_FEATURES", "AVX2")
    assert _decided(zen4) is None
    monkeypatch.delenv("NPY_ENABLE_CPU_FEATURES")
    assert _decided(tmp_path / "no-such-cpuinfo") is None


def test_the_numpy_release_is_read_without_importing_numpy(tmp_path, monkeypatch):
    for name, text in (("new", 'version = "2.4.6"\n'), ("dev", "version = '2.5.0.dev0+git1'\n"), ("bad", "x = 1\n")):
        (tmp_path / name / "numpy").mkdir(parents=True)
        (tmp_path / name / "numpy" / "version.py").write_text(text)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(tmp_path / "new"), str(tmp_path / "dev")])
    assert tuning._numpy_release() == (2, 4)  # the first on the path, as the import system finds it
    monkeypatch.setattr(sys, "path", [str(tmp_path / "dev")])
    assert tuning._numpy_release() == (2, 5)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "bad"), str(tmp_path / "new")])
    assert tuning._numpy_release() is None


def test_the_kbase_script_sets_it_before_numpy_loads():
    probe = (f"import sys; sys.path.insert(0, {str(REPO)!r}); import kbase.cli.__main__ as m; "
             "m.tuning.sort_without_avx512_on_zen4 = lambda: print('policy', 'numpy' in sys.modules); "
             "import kbase.cli; kbase.cli.main = lambda: None; m.run()")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["policy", "False"]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2,
                    reason="counts the process's threads in /proc/self/task (Linux, 2+ cores)")
@pytest.mark.parametrize(("env", "want"), [({}, "1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2")])
def test_no_blas_threads_wait_beside_a_command(env, want):
    """numpy's OpenBLAS starts no thread of its own in a kbase process (kbase calls no BLAS routine), unless
    the user asked for threads."""
    probe = (f"import os, sys; sys.path.insert(0, {str(REPO)!r}); import kbase.cli.tuning as m; "
             "m.no_blas_threads(); import numpy; "
             "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))")
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env={**base, **env})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [want, want]
