"""Library errors in the words of the command line: a field becomes the flag, ``pyproject.toml`` key
or environment variable that set it, and the message stays on one line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.settings import ENV_VARS as SETTINGS_ENV

if TYPE_CHECKING:
    from kbase.settings import Settings

# Setting -> the flag (or argument) that gives it on the command line.
FLAGS = {
    "marker": "--marker", "iteration_kernel": "--iteration-kernel", "iterations": "--iterations",
    "warmup": "--warmup", "trim": "--trim", "gpu": "--gpu", "db": "--db", "name": "--name", "profile": "PROFILE",
    "repo": "--repo", "rev": "--rev", "strict": "--strict", "require_clean": "--require-clean",
    "max_increase_pct": "--max-increase-pct", "abs_floor_us": "--abs-floor-us", "share_floor": "--share-floor",
    "alpha": "--alpha", "total_increase_pct": "--total-increase-pct", "new_kernel": "--new-kernel",
    "ignore": "--ignore", "format": "--format", "reason": "--reason", "expires": "--expires", "pattern": "PATTERN",
    "ref": "REF", "acceptance": "--revoke", "allow_missing_ranks": "--allow-missing-ranks",
    "busy_timeout_s": "KBASE_BUSY_TIMEOUT", "connect_timeout_s": "KBASE_CONNECT_TIMEOUT", "junit": "--junit",
    "output": "--output", "comment_md": "--comment-md",
    "step_summary": "GITHUB_STEP_SUMMARY", "limit": "--limit", "if-no-baseline": "--if-no-baseline",
    "fpr": "--fpr", "history_ref": "--history-ref", "out": "--out", "dir": "--dir",
    "gpu_hour_cost": "--gpu-hour-cost", "gpus": "--fleet-gpus", "keep_branch": "--keep-branch", "branch": "--branch",
    "older_than": "--older-than", "export_dir": "DIR", "import_dir": "DIR", "prune_export": "--export",
    "by": "--by", "min_effect_pct": "--min-effect-pct", "run": "--run", "repeats": "--repeats",
    "timeout": "--timeout", "kind": "--kind", "unit": "--unit", "cannot_judge": "--fail-on-cannot-judge",
    "gpu_model": "--gpu-model",
}
ENV_VARS = {**SETTINGS_ENV, "step_summary": "GITHUB_STEP_SUMMARY"}
ENV_ONLY = ("busy_timeout_s", "connect_timeout_s", "nsys_timeout_s", "step_summary")  # read from the environment only


def _value_text(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return " ".join(str(v) for v in value)
    if isinstance(value, str):
        return repr(value)
    return str(value)


def label(field: str, value: Any, settings: Settings | None) -> str:
    """How the user gave ``field``: ``--gpu 9``, ``[tool.kbase] warmup = 9 (…/pyproject.toml)``, ``KBASE_DB=…``."""
    from kbase.errors import is_unset
    from kbase.settings import Origin

    origin = settings.origin(field) if settings is not None else Origin.FLAG
    if origin == Origin.CONFIG and settings is not None:
        where = f" ({settings.pyproject})" if settings.pyproject else ""
        return f"[tool.kbase] {field}" + ("" if is_unset(value) else f" = {_value_text(value)}") + where
    if origin == Origin.ENV or field in ENV_ONLY:
        var = ENV_VARS.get(field, field.upper())
        return var if is_unset(value) else f"{var}={_mask(field, value)}"
    flag = FLAGS.get(field, field)
    if is_unset(value) or isinstance(value, bool):  # a switch is named as typed: --strict, never --strict True
        return flag
    if flag.isupper():  # a positional argument: the value speaks for itself
        return _value_text(value)
    return f"{flag} {_mask(field, value) if field == 'db' else _value_text(value)}"


def _mask(field: str, value: Any) -> str:
    if field == "db":
        from kbase.store.engine import mask_url

        return mask_url(str(value))
    return str(value)


def one_line(text: str, secrets_of: tuple[str, ...] = ()) -> str:
    """Messages may quote names and paths with newlines, escape sequences, bidi controls or bytes that
    are not UTF-8, and URLs with passwords: one line on stderr, every such character escaped, passwords
    masked in every form (``kbase.store.engine.mask_url``), also the pieces of the store URLs ``secrets_of``
    (the ``--db`` value, ``KBASE_DB``) that a driver echoes in its own words."""
    from kbase.render.safe import inert
    from kbase.store.engine import mask_url

    masked = mask_url(str(text).strip())
    for url in secrets_of:
        masked = mask_url(masked, secret_of=url)
    return inert(masked)


def store_urls(settings: Settings | None) -> tuple[str, ...]:
    """The store URLs a message may quote pieces of: the settings' ``db`` and ``KBASE_DB``."""
    import os

    urls = [os.environ.get("KBASE_DB", ""), str(settings.db or "") if settings is not None else ""]
    return tuple(u for u in dict.fromkeys(urls) if u)


def error_line(exc: BaseException | str, settings: Settings | None, *, labels: bool = True) -> str:
    """One line for ``exc``; ``labels``: a library error's field named as the user gave it (``settings``)."""
    from kbase.errors import KbaseError

    secrets = store_urls(settings)
    if isinstance(exc, KbaseError) and labels:
        settings = settings or getattr(exc, "loading", None)  # a bad value met while the settings were merged
        return one_line(exc.render(lambda f, v: label(f, v, settings)), secrets)
    return one_line(str(exc), secrets)


def failure(exc: Exception, settings: Settings | None) -> tuple[int, str]:
    """What a command that raised ``exc`` prints (one line) and exits with: a ``KbaseError`` its code, a value
    that is not UTF-8 2, anything else 3 (an internal error). The one mapping of ``shared.KbaseGroup`` and of
    ``fast_top`` (a caller re-raises instead where ``KBASE_DEBUG`` asks for the traceback)."""
    from kbase.enums import ExitCode
    from kbase.errors import KbaseError

    if isinstance(exc, KbaseError):
        return exc.code, f"kbase: error: {error_line(exc, settings)}"
    if isinstance(exc, UnicodeEncodeError):  # a value with bytes that are not UTF-8 (Python keeps them as surrogates)
        near = exc.object[max(exc.start - 20, 0):exc.end + 20] if isinstance(exc.object, str) else ""
        return ExitCode.USAGE, ("kbase: error: a value is not valid UTF-8 and cannot be used: "
                                f"{error_line(near, settings, labels=False)}")
    line = error_line(exc, settings, labels=False)
    return ExitCode.INTERNAL, (f"kbase: internal error: {type(exc).__name__}: {line} "
                               "(set KBASE_DEBUG=1 for a traceback)")
