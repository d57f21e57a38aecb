"""Which file a profile came from: name, size, format and sha256 (the store's idempotence key)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():  # a directory of per-rank traces: hash names and contents in order
        for p in sorted(path.iterdir()):
            if p.is_file():
                h.update(p.name.encode())
                h.update(bytes.fromhex(file_sha256(p)))
        return h.hexdigest()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class SourceInfo:
    name: str
    sha256: str
    size: int
    format: str


def describe_source(path: Path, fmt: str) -> SourceInfo:
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file()) if path.is_dir() else path.stat().st_size
    return SourceInfo(name=path.name, sha256=file_sha256(path), size=size, format=fmt)
