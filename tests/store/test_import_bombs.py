"""``kbase import`` as a hostile boundary, decompression bombs: a blob in any codec that decodes past what its header
says, or a zstd frame that states a huge size, is refused in one line naming the file, exit 2, before the store is
opened, and in bounded memory; a blob within the limit imports, and the limit is a setting.

Every case runs against a store on each backend (``store_url``: SQLite, and PostgreSQL where a server can be had).
The world (``exported``, in ``conftest.py``): one real snapshot (a two-rank Kineto trace) exported; each case
rewrites that export file and gives it the name of its new bytes, as ``kbase export`` would have."""

from __future__ import annotations

import lzma
import subprocess
import sys
import zlib

import pytest

from helpers.cli import run_kbase
from helpers.hostile_exports import join, place, refused, split

# ------------------------------------------------------------------------------------------ decompression bombs


def _bomb_blob(codec: int, size: int, declared: int | None = None, streamed: bool = False) -> bytes:
    """A packed blob of one 8-byte column whose payload decompresses to ``size`` zero bytes, its header
    declaring ``declared`` (default: the truth); ``streamed``: a Zstandard frame that states no size."""
    from kbase.store.codec.format1 import DEFLATE as ZLIB
    from kbase.store.codec.format1 import LZMA2 as LZMA
    from kbase.store.codec.packed import MAGIC, VERSION, ZSTD
    from kbase.store.codec.packing import _varint

    declared = size if declared is None else declared
    head = MAGIC + bytes([VERSION, codec]) + _varint(declared // 8) + _varint(2) + b"{}" + _varint(1)
    head += _varint(1) + b"x" + bytes([8]) + _varint(declared)
    if codec == ZSTD:
        import zstandard

        coder = zstandard.ZstdCompressor(level=3, write_content_size=not streamed)
        payload = coder.compress(b"\0" * size)
    elif codec == LZMA:
        from kbase.store.codec.format1 import _LZMA_FILTERS

        payload = lzma.compress(b"\0" * size, format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
    else:
        z = zlib.compressobj(9, zlib.DEFLATED, -15)
        payload = z.compress(b"\0" * size) + z.flush()
    assert codec in (ZLIB, LZMA, ZSTD)
    return head + payload


@pytest.mark.parametrize("codec", [1, 2, 3], ids=["deflate", "lzma", "zstd"])
def test_a_payload_larger_than_its_header_says_is_never_decoded_whole(codec):
    from kbase.store.codec.format1 import recoded
    from kbase.store.codec.packed import Packed, PackedError

    blob = _bomb_blob(codec, 64 << 20, declared=4096)  # 64 MiB of zeros, the header saying 4 KiB
    with pytest.raises(PackedError, match="payload"):  # (deflate and LZMA2: format 1's, read through ``recoded``)
        Packed(recoded(blob)).array("x")


def test_a_zstd_frame_that_states_a_huge_size_is_refused_before_allocating():
    import zstandard

    from kbase.store.codec.packed import Packed, PackedError

    blob = _bomb_blob(3, 1 << 20, declared=4096)
    assert zstandard.frame_content_size(blob[blob.index(b"\x28\xb5\x2f\xfd"):]) == 1 << 20
    with pytest.raises(PackedError, match="1048576 bytes, the header says 4096"):
        Packed(blob).array("x")


# (a file of format 2 holds Zstandard blobs only: deflate and LZMA2 are format 1's, bounded the same way through
# ``format1.recoded``: ``test_a_payload_larger_than_its_header_says_is_never_decoded_whole``)
@pytest.mark.parametrize("codec", [3], ids=["zstd"])
def test_a_bomb_in_an_export_file_is_refused_by_its_declared_size(exported, tmp_path, codec, store_url):
    repo, data = exported
    header, blobs = split(data)
    blobs[2] = _bomb_blob(codec, 1 << 20, declared=22 << 30)  # says 22 GiB
    path = place(tmp_path / "data", join(header, blobs))
    line = refused(repo, tmp_path / "data", path, "samples blob", "import limit", "import_max_mb", url=store_url)
    assert "MiB" in line


def test_a_blob_within_the_limit_imports_and_the_limit_is_a_setting(exported, tmp_path, store_url):
    repo, data = exported
    folder = tmp_path / "data"
    place(folder, data)
    size = len(data)
    r = run_kbase("import", folder, "--db", store_url, "--repo", repo)
    assert r.rc == 0 and "1 new baseline(s)" in r.stderr, r
    # the same file under a limit too small for it: refused by the setting, named, the store (holding the
    # first import) unchanged
    (repo / "pyproject.toml").write_text("[tool.kbase]\nimport_max_mb = 1\n")
    try:
        header, blobs = split(data)
        blobs[2] = _bomb_blob(3, 1 << 20, declared=2 << 20)  # 2 MiB, honest: over a 1 MiB limit
        bad = place(tmp_path / "more", join(header, blobs))
        refused(repo, tmp_path / "more", bad, "import limit of 1 MiB", url=store_url)
    finally:
        (repo / "pyproject.toml").unlink()
    assert size < 1 << 20


@pytest.mark.slow  # a fresh interpreter per codec, and 512 MiB of zeros compressed
@pytest.mark.parametrize("codec,streamed", [(3, False), (3, True)], ids=["zstd", "zstd-no-size"])
def test_a_hostile_file_imports_in_bounded_memory(exported, tmp_path, codec, streamed):
    """The issue's bound: importing a hostile file of under 1 MiB stays under 300 MiB resident. Its blob
    declares what the default limit allows (16 MiB: 48 MiB decoded with its values widened) and its payload
    decodes to 512 MiB: the decoder stops at the declared size. (SQLite only: the file is refused before any
    store is opened, so the backend plays no part; the refusal itself is held on both above.)"""
    repo, data = exported
    header, blobs = split(data)
    blobs[2] = _bomb_blob(codec, 512 << 20, declared=16 << 20, streamed=streamed)
    hostile = join(header, blobs)
    assert len(hostile) < 1 << 20
    folder = tmp_path / "data"
    path = place(folder, hostile)
    # a fresh parent whose one child is `python -m kbase.cli import`: its children's peak is that import's
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run([sys.executable, '-m', 'kbase.cli', 'import', *sys.argv[1:]], capture_output=True, "
            "text=True)\n"
            "print(r.stderr.strip(), file=sys.stderr)\n"
            "print('RSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'RC', r.returncode, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, str(folder), "--db", f"sqlite:///{tmp_path / 'b.db'}", "--repo",
                        str(repo)], capture_output=True, text=True, timeout=300)
    rss_kib = int(r.stderr.split("RSS ")[1].split()[0])
    assert "RC 2" in r.stderr and path.name in r.stderr and "payload" in r.stderr, r.stderr
    assert rss_kib < 300 * 1024, f"{rss_kib / 1024:.0f} MiB resident"
