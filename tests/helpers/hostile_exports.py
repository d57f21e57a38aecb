"""The hostile-import tests' helpers: an export file taken apart (``split``) and put together again (``join``), placed
under the name of its bytes as ``kbase export`` would (``place``), and ``refused``: an import that must fail in one
line naming the file, the store exactly as it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from helpers.cli import run_kbase
from helpers.store_state import store_state


def split(data: bytes) -> tuple[dict, list[bytes | None]]:
    """(header, blobs in order) of a baseline file."""
    from kbase.store.transfer.export_files import BLOBS, parse_baseline

    f = parse_baseline(data)
    header = dict(f.header)
    return header, [f.blobs[b] for b in BLOBS]


def join(header: dict, blobs: list[bytes | None]) -> bytes:
    from kbase.store.transfer.export_files import BLOBS, MAGIC

    lengths = {b: None if blob is None else len(blob) for b, blob in zip(BLOBS, blobs, strict=True)}
    head = json.dumps({**header, "blobs": lengths}, sort_keys=True, separators=(",", ":")).encode()
    return MAGIC + head + b"\n" + b"".join(blob or b"" for blob in blobs)


def place(folder: Path, data: bytes, suffix: str = ".baseline") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / (hashlib.sha256(data).hexdigest()[:40] + suffix)
    path.write_bytes(data)
    return path


def refused(repo: Path, folder: Path, path: Path, *words: str, url: str):
    """Import ``folder`` into the store at ``url``: exit 2, one line naming ``path`` (and ``words``), the store
    exactly as it was (an absent one not created). On PostgreSQL the line is also SQLite's, word for word."""
    before = store_state(url)
    r = run_kbase("import", folder, "--db", url, "--repo", repo)
    assert r.rc == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and path.name in lines[0] and "Traceback" not in r.stderr, r
    for w in words:
        assert w in lines[0], (w, r)
    assert store_state(url) == before, "a refused import changed (or created) the store"
    if not url.startswith("sqlite"):
        twin = folder.parent / f"twin-{path.name}.db"
        t = run_kbase("import", folder, "--db", f"sqlite:///{twin}", "--repo", repo)
        assert (t.rc, t.stderr) == (r.rc, r.stderr) and not twin.exists(), (t, r)
    return lines[0]
