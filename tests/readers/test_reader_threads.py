"""The nsys reader takes a second thread only while a core is idle (``kbase.readers.threads``): on busy cores
a second thread costs CPU and saves no time. One thread or two, the profile is the same."""

from __future__ import annotations

import os

import pytest

from kbase.readers import nsys
from kbase.readers.threads import reader_threads


def _loadavg(tmp_path, runnable: int):
    path = tmp_path / "loadavg"
    path.write_text(f"0.52 0.58 0.59 {runnable}/467 12345\n", encoding="ascii")
    return str(path)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2 or
                    (os.cpu_count() or 1) < 2, reason="needs two usable cores")
def test_a_second_thread_only_while_a_core_is_idle(tmp_path, monkeypatch):
    monkeypatch.delenv("KBASE_READ_THREADS", raising=False)
    cores = os.cpu_count() or 2
    assert reader_threads(_loadavg(tmp_path, 1)) == 2  # only this process runs
    assert reader_threads(_loadavg(tmp_path, cores - 1)) == 2
    assert reader_threads(_loadavg(tmp_path, cores)) == 1  # every core busy
    assert reader_threads(_loadavg(tmp_path, 4 * cores)) == 1
    assert reader_threads(str(tmp_path / "none")) == 2  # no such count (not Linux): as on idle cores
    (tmp_path / "bad").write_text("garbage")
    assert reader_threads(str(tmp_path / "bad")) == 2
    for fixed in ("1", "2"):
        monkeypatch.setenv("KBASE_READ_THREADS", fixed)
        assert reader_threads(_loadavg(tmp_path, 1)) == reader_threads(_loadavg(tmp_path, 99)) == int(fixed)
    monkeypatch.setenv("KBASE_READ_THREADS", "8")  # not a choice: the load decides
    assert reader_threads(_loadavg(tmp_path, 99)) == 1


def test_one_thread_or_two_read_the_same_profile(tmp_path, monkeypatch):
    from kbase.synth.generate import ExportSpec, generate_export

    from helpers.tiny_export import assert_same_profile

    # large enough for the decoded pages (and the runtime thread's help on the kernel table)
    export = generate_export(tmp_path / "large.sqlite", ExportSpec(n_gpus=2, iterations=6, seed=4)).path
    got = []
    for threads in ("1", "2"):
        monkeypatch.setenv("KBASE_READ_THREADS", threads)
        got.append(nsys.read_nsys(export))
    assert_same_profile(*got)


# --------------------------------------------------------------------------- the pool the reader's threads run in


def test_pool_maps_in_order_and_runs_on_its_threads():
    import threading

    from kbase.readers.threads import Pool

    main = threading.get_ident()
    with Pool(2) as pool:
        got = pool.map(lambda x: (x * x, threading.get_ident()), range(20))
    assert [v for v, _ in got] == [x * x for x in range(20)]
    assert main not in {t for _, t in got} and 1 <= len({t for _, t in got}) <= 2


def test_pool_hands_a_raised_error_to_result_and_keeps_working():
    from kbase.errors import InputError
    from kbase.readers.threads import Pool

    def boom():
        raise InputError("export.sqlite: a page that is not a page")

    with Pool(1) as pool:
        bad = pool.submit(boom)
        good = pool.submit(sum, [1, 2, 3])
        with pytest.raises(InputError, match="not a page"):
            bad.result()
        assert good.result() == 6


def test_leaving_the_pool_waits_for_every_call_and_ends_its_threads():
    import threading
    import time

    from kbase.readers.threads import Pool

    done: list[int] = []
    before = threading.active_count()
    with Pool(2) as pool:
        for i in range(4):
            pool.submit(lambda i=i: (time.sleep(0.01), done.append(i)))
    assert sorted(done) == [0, 1, 2, 3]
    assert threading.active_count() == before
