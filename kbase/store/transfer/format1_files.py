"""Export files of format 1 (kbase before kernel-table format 2) read as format 2: the old file checked by its own
digest, its kernel table converted by ``codec.format1``, so an old export folder imports with nothing lost."""

from __future__ import annotations

from typing import Any

from kbase.store.codec.format1 import FORMAT, _plain, convert, recoded
from kbase.store.codec.packed import Packed


def _first_use(ids: list[int]) -> list[int]:
    return list(dict.fromkeys(ids))


def file_as_format2(f: Any, limit: int, *, check: bool) -> Any:
    """An export file of format 1 (``export_files.BaselineFile``) as the same baseline in format 2: its format-1
    content digest checked (``check``), its kernel table converted (``convert``), its names by row, its op list
    sorted, the format-2 digest. ``ExportFileError`` saying what is wrong."""
    import hashlib

    from kbase.store.codec.packed import PackedError
    from kbase.store.transfer.export_files import (
        BLOBS,
        BOOKKEEPING,
        DERIVED,
        BaselineFile,
        _json,
        content_digest,
        jsonable_row,
    )
    from kbase.store.transfer.import_checks import ExportFileError, check_budget, check_names

    names, op_names = f.header["names"], f.header.get("op_names", [])
    if f.header["kernels_format"] != FORMAT:
        raise ExportFileError(f"kernel data of format {f.header['kernels_format']} in a file of format 1")
    check_names(names, op_names)
    check_budget(f.blobs, limit)
    blobs = {b: None if f.blobs[b] is None else recoded(f.blobs[b]) for b in BLOBS}
    try:
        ids = Packed(blobs["levels"] or b"").ints("name_id")
        op_ids = Packed(blobs["ops"]).ints("op") if blobs["ops"] is not None else []
        if any(not 0 <= i < len(names) for i in ids) or len(ids) != f.header["kernels"]:
            raise ExportFileError("the levels' name ids do not match the names listed")
        if any(not 0 <= i <= len(op_names) for i in op_ids) or (op_names and blobs["ops"] is None):
            raise ExportFileError("the ops blob's op ids do not match the op names listed")
        if check:
            h = hashlib.sha256()
            skip = BOOKKEEPING | DERIVED | {"id"}
            h.update(_json({k: v for k, v in jsonable_row(f.row).items() if k not in skip}))
            h.update(_json([names[i][0] for i in _first_use(ids)]))
            used_ops = [op_names[i - 1] for i in _first_use(op_ids) if i]
            if used_ops:
                h.update(_json(used_ops))
            for b in BLOBS:
                plain = _plain(blobs[b], {"levels": "name_id", "ops": "op"}.get(b, ""))
                h.update(b"-" if plain is None else b"+%d:" % len(plain) + plain)
            if h.hexdigest() != f.content:
                raise ExportFileError("its content digest does not match its kernel data")
        assert blobs["levels"] is not None and blobs["board"] is not None
        new, ops, rows, order = convert(blobs["levels"], blobs["board"], blobs["samples"], blobs["sketches"],
                                        blobs["ops"], {i + 1: str(n[0]) for i, n in enumerate(op_names)})
    except (PackedError, ValueError, TypeError, KeyError, IndexError) as exc:
        if isinstance(exc, ExportFileError):
            raise
        raise ExportFileError(f"kernel data unreadable ({exc})") from None
    by_row = [names[i] for i in rows]
    listed = [op_names[i - 1] for i in order]
    out = {"levels": new.levels, "board": new.board, "samples": new.samples, "sketches": new.sketches, "ops": ops}
    header = {**f.header, "format": 2, "kernels_format": 2, "names": by_row,
              "content": content_digest(f.row, [n[0] for n in by_row], out, listed)}
    header.pop("op_names", None)
    if ops is not None:
        header["op_names"] = listed
    return BaselineFile(header, out)
