"""The streaming layer under the Kineto reader: sniff a file, open it (gzip or not) as text, and
decode a Chrome-trace JSON document one event at a time, so a large trace never sits in memory
as Python objects. Timestamps convert exactly from decimal microseconds to integer ns.
"""

from __future__ import annotations

import codecs
import contextvars
import gzip
import json
import os
import re
import stat
import zlib
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

from kbase.errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"
_SNIFF_CHARS = 256 * 1024
_CHUNK = 1 << 20
# The most text one JSON value may take: one trace event, or one top-level metadata value. Real ones take a
# few KB (the largest event of the shared traces: 2.8 KB; metadata: 21 KB); names are capped at 64 Ki
# characters (``integrity.MAX_NAME_CHARS``). Past it the file is refused before the value is decoded, so a
# gzip bomb of one huge string costs at most about twice this much text in memory, not the string.
MAX_VALUE_CHARS = 16 << 20


def _trace_files_in(directory: Path) -> list[Path]:
    """Entries named ``*.json`` / ``*.json.gz`` other than folders: files (symlinks followed), and
    links to nothing or pipes (a rank that cannot be read, reported as such rather than skipped)."""
    out = []
    for p in directory.iterdir():
        if p.name.endswith((".json", ".json.gz")) and not p.is_dir():
            out.append(p)  # pipes and devices too: reading one says it is not a trace file
    return sorted(out)


def _head_text(path: Path, n_chars: int = _SNIFF_CHARS) -> str:
    got = sniff(path, n_chars, strict=False)
    return got[0] if got else ""


def sniff(path: Path, n_bytes: int = _SNIFF_CHARS, strict: bool = True) -> tuple[str, bool] | None:
    """(the first ``n_bytes`` of the file's text, gzip undone; whether that is the whole file), or
    None when it cannot be read, un-gzipped or (``strict``) decoded as UTF-8."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None  # a pipe or device: opening it could block
        with open(path, "rb") as fh:
            magic = fh.read(2)
            fh.seek(0)
            if magic == _GZIP_MAGIC:
                with gzip.GzipFile(fileobj=fh) as gz:
                    raw = gz.read(n_bytes + 1)
            else:
                raw = fh.read(n_bytes + 1)
    except (OSError, EOFError, zlib.error):
        return None
    complete = len(raw) <= n_bytes
    try:
        text = codecs.getincrementaldecoder("utf-8")("strict" if strict else "ignore").decode(
            raw[:n_bytes], final=complete
        )
    except UnicodeDecodeError:
        return None
    return text, complete


def looks_like_trace_text(head: str) -> bool:
    """Does this start of a JSON text look like a Chrome trace (PyTorch profiler)?"""
    head = head.lstrip("\ufeff \t\r\n")
    if head.startswith("{"):
        # current traces may put long metadata (process-group lists of big jobs) before traceEvents
        return any(key in head for key in ('"traceEvents"', '"schemaVersion"', '"distributedInfo"')) or (
            '"ph"' in head and '"ts"' in head
        )
    if head.startswith("["):
        return '"ph"' in head and '"ts"' in head
    return False


def looks_like_kineto(path: Path) -> bool:
    """True when ``path`` (or, for a directory, a ``.json``/``.json.gz`` file in it) looks like a
    PyTorch profiler trace. Sniffs the content (gzip or not), not the file name."""
    path = Path(path)
    try:
        if path.is_dir():
            return any(looks_like_kineto(p) for p in _trace_files_in(path))
        return looks_like_trace_text(_head_text(path))
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# exact µs -> ns


def _ns(v) -> int:
    """Microseconds (int, or decimal text kept by the decoder, or float) -> integer ns, exactly."""
    if type(v) is int:
        return v * 1000
    if type(v) is str:
        ip, _, fp = v.partition(".")
        if len(fp) <= 3 and (fp == "" or fp.isdigit()):
            try:
                whole = int(ip)
            except ValueError:
                whole = None
            if whole is not None:
                frac = int((fp + "00")[:3]) if fp else 0
                return whole * 1000 - frac if ip.lstrip().startswith("-") else whole * 1000 + frac
        try:
            return int((Decimal(v) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except (InvalidOperation, ValueError):
            raise ValueError(f"not a number: {v!r}") from None
    if v is None:
        return 0
    if isinstance(v, float):
        return round(v * 1000)
    if isinstance(v, int):
        return int(v) * 1000
    raise ValueError(f"not a number: {v!r}")


# --------------------------------------------------------------------------------------------
# streaming JSON


class _Stream:
    """Incremental reader over a text file: decodes one JSON value at a time with the C scanner."""

    _WS = re.compile(r"[ \t\n\r]*")

    def __init__(self, read, label: str):
        self._read = read
        self.label = label
        self.buf = ""
        self.pos = 0
        self.dropped = 0  # characters discarded before buf[0]
        self.eof = False

    def more(self, want: int = 0) -> bool:
        if self.eof:
            return False
        data = self._read(max(want, _CHUNK))
        if not data:
            self.eof = True
            return False
        self.dropped += self.pos
        self.buf = self.buf[self.pos :] + data
        self.pos = 0
        return True

    def peek(self) -> str:
        """Next non-whitespace character ('' at end of input); pos is left on it."""
        while True:
            self.pos = self._WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # \s* always matches
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if c == "":
            self.fail(f"expected {what}, found the end of the file: cut short")
        if c not in chars:
            self.fail(f"expected {what}, found {c!r}")
        self.pos += 1
        return c

    def fail(self, msg: str):
        raise InputError(f"{self.label}: invalid JSON ({msg} at char {self.dropped + self.pos})")

    def value(self, decoder: json.JSONDecoder):
        if self.peek() == "":
            self.fail("unexpected end of file")
        while True:
            try:
                val, end = decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                self.fail("values nested too deeply")
            except json.JSONDecodeError as e:
                truncated = e.pos >= len(self.buf) - 64 or e.msg.startswith("Unterminated string")
                if truncated and len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    raise InputError(f"{self.label}: one JSON value (from char {self.dropped + self.pos:,}) runs "
                                     f"past {MAX_VALUE_CHARS >> 20} MiB of text: no trace event or metadata value is "
                                     "this large, refusing the file") from None
                if truncated and self.more(len(self.buf) - self.pos):
                    continue
                if truncated and self.eof:
                    raise InputError(
                        f"{self.label}: invalid JSON, cut short (the file ends inside a value at char "
                        f"{self.dropped + len(self.buf)})"
                    ) from None
                raise InputError(
                    f"{self.label}: invalid JSON ({e.msg.removesuffix(' at')} at char {self.dropped + e.pos})"
                ) from None
            except ValueError as e:  # e.g. an integer of more than 4300 digits
                self.fail(f"a value cannot be read: {str(e).split(';')[0]}")
            if end >= len(self.buf) and end - self.pos <= MAX_VALUE_CHARS and self.more():
                continue  # a number at the end of the buffer may go on
            self.pos = end
            return val


# Set by ``readers.read_profile`` around a read: called with the bytes of the file (as stored,
# compressed or not) consumed so far, as the text streams (for a progress bar).
READ_POSITION: contextvars.ContextVar = contextvars.ContextVar("kbase_kineto_read_position", default=None)


def _open_text(path: Path, label: str):
    """(read function, closer) for the file's text; gzip detected from the magic bytes."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise InputError(f"{label}: not a regular file (a pipe or device cannot be read as a trace)")
        fh = open(path, "rb")  # noqa: SIM115 - closed by the returned closer
    except OSError as e:
        raise InputError(f"{label}: cannot read ({e.strerror or e})") from None
    magic = fh.read(2)
    fh.seek(0)
    is_gz = magic == _GZIP_MAGIC
    raw = gzip.GzipFile(fileobj=fh) if is_gz else fh
    dec = codecs.getincrementaldecoder("utf-8")()
    position = READ_POSITION.get()

    def read(n: int) -> str:
        try:
            data = raw.read(n)
            if position is not None:
                position(fh.tell())
            return dec.decode(data, final=not data)
        except UnicodeDecodeError:
            raise InputError(f"{label}: not a text file (invalid UTF-8)") from None
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise InputError(f"{label}: broken gzip stream ({e or type(e).__name__})") from None
        except OSError as e:
            if is_gz:
                raise InputError(f"{label}: broken gzip stream ({e})") from None
            raise InputError(f"{label}: cannot read ({e.strerror or e})") from None

    def close():
        if raw is not fh:
            raw.close()
        fh.close()

    return read, close


def _events(stream: _Stream, meta: dict, ev_decoder, meta_decoder):
    """Yield the trace events one by one; top-level keys other than traceEvents go into meta."""
    label = stream.label
    if stream.peek() == "\ufeff":
        stream.pos += 1
    first = stream.peek()
    if first == "[":
        meta["_format"] = "list"
        yield from _array(stream, ev_decoder)
    elif first == "{":
        stream.pos += 1
        seen = False
        if stream.peek() == "}":
            stream.pos += 1
        else:
            while True:
                key = stream.value(meta_decoder)
                if not isinstance(key, str):
                    stream.fail("expected an object key")
                stream.expect(":", "':'")
                if key == "traceEvents":
                    if stream.peek() != "[":
                        raise InputError(
                            f"{label}: JSON but not a PyTorch profiler trace (traceEvents is not a list)"
                        )
                    seen = True
                    yield from _array(stream, ev_decoder)
                else:
                    meta[key] = stream.value(meta_decoder)
                if stream.expect(",}", "',' or '}'") == "}":
                    break
        if not seen:
            raise InputError(f"{label}: JSON but not a PyTorch profiler trace (no traceEvents)")
        meta["_format"] = "object"
    elif first == "":
        raise InputError(f"{label}: empty file, not a PyTorch profiler trace")
    else:
        raise InputError(f"{label}: not JSON, not a PyTorch profiler trace (starts with {first!r})")
    if stream.peek() != "":
        stream.fail("extra data after the JSON value")


def _array(stream: _Stream, decoder):
    stream.expect("[", "'['")
    if stream.peek() == "]":
        stream.pos += 1
        return
    while True:
        yield stream.value(decoder)
        if stream.expect(",]", "',' or ']'") == "]":
            return
