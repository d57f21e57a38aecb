"""Front door, kernels over history: one kernel over the stored baselines, kernel lookup, steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbase.comparison.result import KernelHistory
from kbase.settings import Settings

if TYPE_CHECKING:

    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.history import StepsReport
    from kbase.store.engine import Store
    from kbase.store.reader import StoreReader



from kbase.api.common import _fast_read, _store


def find_kernel(query: str, settings: Settings | None = None, *, workload: str | None = None,
                store: Store | None = None) -> tuple[str, str]:
    """The stored kernel a person's ``query`` names — exact, short name, ``#id``, family, substring or
    regex (``analysis.lookup``): (full name, short name); ``KernelNotFound`` (with suggestions) or
    ``AmbiguousKernel`` (with the candidates) otherwise."""
    from kbase.analysis.lookup import find_kernel as lookup
    from kbase.store.reader import EngineReader

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        names, shorts = EngineReader(st.engine).kernel_names(workload)
    k = lookup(query, names, shorts)
    return k.name, k.short


def history(kernel: str, settings: Settings | None = None, *, workload: str | None = None,
            branch: str | None = None, store: Store | None = None) -> KernelHistory:
    """One kernel (any name ``find_kernel`` accepts) across every stored baseline, oldest first (of
    ``workload`` / ``branch`` when given)."""
    settings = settings or Settings.load()

    def read(rd: StoreReader) -> KernelHistory:  # either read path: the same two queries
        from kbase.analysis.lookup import find_kernel as lookup

        names, shorts = rd.kernel_names(workload)
        k = lookup(kernel, names, shorts)
        return KernelHistory(query=kernel, name=k.name, short_name=k.short,
                             rows=rd.kernel_history_rows(k.name, workload, branch))

    fast = _fast_read(settings, store, read)
    if fast is not None:
        return fast
    from kbase.store.reader import EngineReader

    with _store(settings, store, readonly=True) as st:
        return read(EngineReader(st.engine))


def steps(settings: Settings | None = None, *, workload: str | None = None, last: int = 50, rev: str = "HEAD",
          store: Store | None = None) -> StepsReport:
    """Step changes (and creeps) of every kernel over the last ``last`` baselines of a workload on the
    first-parent line ending at ``rev``, largest effect on the iteration first."""
    from kbase.comparison.history import steps_report

    settings = settings or Settings.load()

    def read(rd: StoreReader) -> StepsReport:  # either read path: the levels blobs of the line's baselines
        return steps_report(rd, workload or settings.workload, settings.repo, last=last, rev=rev)

    fast = _fast_read(settings, store, read)
    if fast is not None:
        return fast
    from kbase.store.reader import EngineReader

    with _store(settings, store, readonly=True) as st:
        return read(EngineReader(st.engine))


def history_steps(h: KernelHistory) -> list[KernelStep] | None:
    """Steps and creeps in one kernel's history; None when its baselines span several workloads or
    branches (a step is a change along one line of commits: pass ``workload`` and ``branch``)."""
    from kbase.comparison.changepoints import kernel_history_steps

    if len({r["workload"] for r in h.rows}) > 1 or len({r["branch"] for r in h.rows}) > 1:
        return None
    return kernel_history_steps([r["per_iter_ns"] for r in h.rows], [str(r["commit"]) for r in h.rows])
