"""A command's flags as one ``Settings`` object, and the one check of a choice flag: apart from the Typer app
(``cli.shared`` re-exports them) so that a plain stored diff or gate answered without the command line
(``cli.fast_diff``) builds its settings and reports its errors exactly as the command does."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbase.settings import Settings

# the window options (``shared.window_options``), in the order the command hands them over as one dict
WINDOW_FLAGS = ("marker", "iteration_kernel", "iterations", "warmup", "trim", "gpu", "allow_missing_ranks")

_SETTINGS: list[Settings] = []  # the settings of the command running now (errors name their origin)


def current_settings() -> Settings | None:
    return _SETTINGS[-1] if _SETTINGS else None


def make_settings(*, repo: Path | None = None, db: str | None = None, name: str | None = None,
                  profile: Path | None = None, window: dict[str, Any] | None = None,
                  policy: dict[str, Any] | None = None, gpu_hour_cost: float | None = None,
                  fleet_gpus: int | None = None, gpu_model: str | None = None) -> Settings:
    """The command's one Settings object: defaults < [tool.kbase] < environment < these flags."""
    from kbase.settings import Settings

    _SETTINGS.clear()
    flags = dict(window or {})
    if flags.get("trim"):
        flags["trim"] = list(flags["trim"])
    settings = Settings.load(repo=repo, db=db, name=name, profile=profile, policy=policy, window=flags,
                             gpu_hour_cost=gpu_hour_cost, gpus=fleet_gpus, gpu_model=gpu_model)
    _SETTINGS.append(settings)
    return settings


def check_choice(value: str, choices: type[StrEnum], flag: str = "--format") -> Any:
    """One format check for every command: the value as the command's StrEnum, or a one-line error."""
    from kbase.errors import SettingsError

    try:
        return choices(value)
    except ValueError:
        names = ", ".join(c.value for c in choices)
        raise SettingsError(f"unknown value (choose one of {names})", field=flag.lstrip("-"), value=value) from None
