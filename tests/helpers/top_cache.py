"""The top cache's tests' helpers: the entries a store's ``cache/`` holds, and a counter of the leaderboards computed
from a file."""

from __future__ import annotations

from pathlib import Path


def entries(world: dict[str, Path]) -> list[Path]:
    folder = world["db"].parent / "cache"
    return sorted(folder.glob("top-*.kbtc")) if folder.is_dir() else []


def _board_calls(monkeypatch) -> list[int]:
    import kbase.api.capture as capture

    calls: list[int] = []
    real = capture._board

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(capture, "_board", counted)
    return calls
