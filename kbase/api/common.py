"""What the front door's modules share: the progress callback type, the store context, and the one rule for
the workload a command means."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kbase.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path

    from kbase.readers.profile import Profile
    from kbase.store.engine import Store
    from kbase.store.read.reader import StoreReader

Progress = Callable[[int, int], None]  # (rows read now, rows in all), as a large export streams


def warm_imports(*modules: str) -> None:
    """Import ``modules`` on a daemon thread, while the caller's thread reads a profile (its readers release
    the GIL): a command that stores what it read finds the store stack already loaded."""
    import importlib
    import threading

    def work() -> None:
        for m in modules:
            with contextlib.suppress(Exception):  # the caller's own import reports any problem
                importlib.import_module(m)

    threading.Thread(target=work, name="kbase-warm-imports", daemon=True).start()


@contextlib.contextmanager
def _store(settings: Settings, store: Store | None, readonly: bool = False) -> Iterator[Store]:
    """The given store, or the settings' store opened for this call and closed after it. ``readonly``: a
    command that only reads opens it through its read connection alone (no SQLAlchemy for a store at the head
    schema) and never creates a store (``NoStoreError`` instead). Every read goes through ``Store.reader``."""
    if store is not None:
        yield store
        return
    from kbase.store.engine import open_store

    opened = open_store(settings, readonly=readonly)
    try:
        yield opened
    finally:
        opened.close()


def workload_for(settings: Settings, reader: StoreReader, workload: str | None = None) -> str:
    """The workload a command means: ``workload`` when the caller names one, else the settings' when the user
    gave one (``--name``, ``KBASE_NAME``, ``[tool.kbase] name``), else the store's only workload; with several
    stored and none named, an ``InputError`` listing them (exit 2); with none stored, the settings' default
    (what a bare ``kbase snapshot`` stores), so the command says there is no baseline in its own words. A named
    workload the store does not hold while it holds others is ``unknown_workload`` (exit 2: a typo names the
    stored name it is close to; ``kbase gate --if-no-baseline pass`` passes a first run, no stored name close)."""
    from kbase.errors import InputError

    named = workload or (settings.workload if settings.workload_given else None)
    names = reader.workloads()
    if named:
        if names and named not in names:
            raise unknown_workload(named, names)
        return named
    if len(names) == 1:
        return names[0]
    if not names:
        return settings.workload
    shown = ", ".join(names[:20]) + (f", … ({len(names)} in all)" if len(names) > 20 else "")
    raise InputError(f"the store holds {len(names)} workloads ({shown}): choose one with --name (or [tool.kbase] "
                     "name, KBASE_NAME)")


CLOSE_NAME = 0.75  # difflib ratio from which a stored workload name is taken for the one meant (resnet5 ~ resnet50)


def unknown_workload(name: str, stored: list[str]) -> Exception:
    """The error of a workload name the store does not hold (``errors.UnknownWorkloadError``): the stored names and
    the closest one (``difflib``), when one is close enough to be the name meant."""
    import difflib

    from kbase.errors import UnknownWorkloadError

    close = difflib.get_close_matches(name, stored, n=1, cutoff=CLOSE_NAME)
    shown = ", ".join(stored[:20]) + (f", … ({len(stored)} in all)" if len(stored) > 20 else "")
    hint = f"did you mean {close[0]!r}? " if close else ""
    err = UnknownWorkloadError(f"no workload of that name in the store; {hint}it holds {len(stored)}: {shown} "
                               "(kbase snapshot --name stores a new one)", field="name", value=name)
    err.close, err.stored = (close[0] if close else None), tuple(stored)
    return err


def named_workload(settings: Settings) -> str | None:
    """The workload the user named (``--name``, ``KBASE_NAME``, ``[tool.kbase] name``), not one chosen for them."""
    from kbase.settings import Origin

    return settings.workload if settings.origin("name") in (Origin.FLAG, Origin.ENV, Origin.CONFIG) else None


def check_baseline_workload(ref: str, workload: str, settings: Settings) -> None:
    """An ``@ID`` of another workload than the one the user named: an ``InputError`` (never silently ignored)."""
    from kbase.errors import InputError

    named = named_workload(settings)
    if named is not None and workload != named:
        raise InputError(f"{ref} is a baseline of workload {workload!r}, not of the one named ({named!r}): drop "
                         f"--name, or give a baseline of {named!r}", field="name", value=named)


def with_workload(settings: Settings, reader: StoreReader, workload: str | None = None) -> Settings:
    """``settings`` with ``workload_for``'s workload, marked as chosen (so the calls they are passed on to do not
    choose again)."""
    import dataclasses

    from kbase.settings import Origin

    name = workload_for(settings, reader, workload)
    if settings.workload_given and name == settings.workload:
        return settings
    origin = settings.origin("name") if settings.workload_given and not workload else Origin.STORE
    return dataclasses.replace(settings, workload=name, origins={**settings.origins, "name": origin})


def name_gpus(profile: Profile, model: str, path: Path | str) -> None:
    """The GPUs a capture does not name (read as "unknown") named ``model`` (``--gpu-model``); a capture that
    names another model is an ``InputError`` (the flag records what a capture lacks, it never overrides it)."""
    from kbase.errors import InputError

    named = sorted({m for m in profile.gpu_columns.model if m != "unknown"} - {model})
    if named:
        raise InputError(f"{path} names its GPU(s) itself ({', '.join(named)}): --gpu-model only names the GPU of a "
                         "capture that does not (drop it, or give the model the capture names)", field="gpu_model",
                         value=model)
    profile.gpu_columns.model = [model for _ in profile.gpu_columns.model]
