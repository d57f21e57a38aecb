"""Every file kbase writes goes through here, so that no output can be turned into a write somewhere else
through a symbolic link (a link committed to a repository, or left in a shared folder, and a CI job that
runs as root writes through it).

Rules (README "Failure behaviour", docs/failure-behaviour.md):

- **The path a user names** (``--junit``, ``--output``, ``--comment-md``, ``GITHUB_STEP_SUMMARY``, the
  report's ``--out`` folder): when its last component is a symbolic link, kbase refuses it (exit 2, one line,
  nothing written) rather than write to wherever it points — except a link to a device or pipe
  (``/dev/stdout``, ``/dev/null``), which cannot stand for a file to overwrite. The folders *above* it are
  the user's own choice and are followed as the system follows them. The file is opened with ``O_NOFOLLOW``
  (no link can be swapped in after the check), truncated only once it is known to be a regular file, and a
  device or pipe is written as it is (never replaced by a file).
- **Inside an output folder** kbase fills (the report's pages, its ``assets/`` folder and files, the
  manifest; the files of ``kbase export DIR``): nothing is ever followed. The folder is opened once without
  following a link and every entry is reached through that open folder (``dir_fd``); each file is written
  to a new temporary name and renamed over its entry, so an entry that is a symbolic link (or a hard link to
  another file) is *replaced*, never written through; a sub-folder that is a link is replaced by a real
  folder (the link alone is removed, never what it points at).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from kbase.errors import SettingsError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _special(mode: int) -> bool:
    """A device or pipe: written as it is, never replaced or truncated (``/dev/null``, ``/dev/stdout``)."""
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode)


def _link_target_mode(path: Path) -> int | None:
    """The mode of what the symbolic link ``path`` points at (None: nothing)."""
    try:
        return os.stat(path).st_mode
    except OSError:
        return None


def check_output_file(path: Path | str, field: str) -> None:
    """Refuse, before any work, an output file that cannot or must not be written: its folder missing or a
    file, the path a folder, no write permission, or a symbolic link to anything but a device or pipe."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise SettingsError(f"cannot be written ({exc.strerror or exc})", field=field, value=str(p)) from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        target = _link_target_mode(p)
        if target is None or not _special(target):
            raise SettingsError("is a symbolic link; kbase does not write through links (give the real path)",
                                field=field, value=str(p))
    if p.is_dir():
        raise SettingsError("is a directory, not a file", field=field, value=str(p))
    if not parent.exists():
        raise SettingsError(f"cannot be written: folder {parent} does not exist", field=field, value=str(p))
    if not parent.is_dir():
        raise SettingsError(f"cannot be written: {parent} is a file, not a folder", field=field, value=str(p))
    target_path = p if p.exists() else parent
    if not os.access(target_path, os.W_OK):
        raise SettingsError(f"cannot be written: {target_path} is not writable", field=field, value=str(p))


def write_output_file(path: Path | str, text: str, field: str, append: bool = False) -> None:
    """Write (or append) ``text`` to the file the user named, by the rules above; a failure is one line
    naming the option (exit 2)."""
    p = Path(path)
    check_output_file(p, field)
    fd = _open_for_output(p, append, field)
    try:
        os.set_blocking(fd, True)
        _write_all(fd, text.encode("utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot be written ({exc.strerror or exc})", field=field, value=str(p)) from None
    finally:
        os.close(fd)


def _open_for_output(p: Path, append: bool, field: str) -> int:
    try:
        is_link = stat.S_ISLNK(os.lstat(p).st_mode)
    except FileNotFoundError:
        is_link = False
    except OSError as exc:
        raise SettingsError(f"cannot be written ({exc.strerror or exc})", field=field, value=str(p)) from None
    if not is_link:
        return _open_no_follow(p, append, field)
    try:  # (checked: a link to a device or pipe) written as it is
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | _CLOEXEC)
    except OSError as exc:
        raise SettingsError(f"cannot be written ({exc.strerror or exc})", field=field, value=str(p)) from None
    if not _special(os.fstat(fd).st_mode):  # swapped for a file since the check: nothing written
        os.close(fd)
        raise SettingsError("is a symbolic link; kbase does not write through links (give the real path)",
                            field=field, value=str(p))
    return fd


def _open_no_follow(p: Path, append: bool, field: str) -> int:
    """``p`` opened for writing without following a link at its last component; a regular file truncated
    (unless ``append``), a device or pipe as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC | (os.O_APPEND if append else 0)
    try:
        fd = os.open(p, flags, 0o666)
    except OSError as exc:
        if exc.errno in (getattr(os, "ELOOP", -1), getattr(os, "EMLINK", -1)):  # a link swapped in: refused
            raise SettingsError("is a symbolic link; kbase does not write through links (give the real path)",
                                field=field, value=str(p)) from None
        raise SettingsError(f"cannot be written ({exc.strerror or exc})", field=field, value=str(p)) from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) and not append:
        os.ftruncate(fd, 0)
    elif not stat.S_ISREG(mode) and not _special(mode):
        os.close(fd)
        raise SettingsError("is not a regular file", field=field, value=str(p))
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class OutputDir:
    """A folder kbase fills, opened once without following a link; every entry is reached through it (see
    the module). ``field`` names the option in errors. Use as a context manager (closes the folder)."""

    def __init__(self, path: Path | str, field: str, *, create: bool = True, _fd: int | None = None) -> None:
        self.path = Path(path)
        self.field = field
        if _fd is not None:
            self.fd = _fd
            return
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise self._error(f"cannot be used ({exc.strerror or exc})") from None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise self._error("is a symbolic link; kbase does not write through links (give the real folder)")
        if st is not None and not stat.S_ISDIR(st.st_mode):
            raise self._error("exists and is not a folder")
        if st is None and create:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._error(f"cannot be created ({exc.strerror or exc})") from None
        try:
            self.fd = os.open(self.path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
        except OSError as exc:
            raise self._error(f"cannot be opened as a folder without following a link ({exc.strerror or exc})"
                              ) from None

    def _error(self, message: str, name: str | None = None) -> SettingsError:
        where = self.path / name if name else self.path
        return SettingsError(message, field=self.field, value=str(where))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- looking inside (never following)

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def kind(self, name: str) -> str | None:
        """``"file"``, ``"dir"``, ``"link"`` or ``"other"`` of entry ``name`` (the entry itself), None if none."""
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(mode):
            return "link"
        return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"

    def refuse_links(self, names: list[str]) -> None:
        """Refuse (exit 2) when any of ``names`` is a symbolic link: for a folder whose files are written by
        tools that follow links (SQLite, git: the demo's ``--dir``)."""
        for name in names:
            if self.kind(name) == "link":
                raise self._error("is a symbolic link; kbase does not write through links (remove it, or choose "
                                  "another folder)", name)

    def remove(self, name: str) -> None:
        """Remove entry ``name`` (a file or a link: the link itself, never its target)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    # ---- writing (never following)

    def subdir(self, name: str) -> OutputDir:
        """Sub-folder ``name``, made if missing; a link (or a file) there is replaced by a real folder."""
        _plain_name(name)
        if self.kind(name) not in (None, "dir"):
            try:
                os.unlink(name, dir_fd=self.fd)
            except OSError as exc:
                raise self._error(f"cannot be replaced by a folder ({exc.strerror or exc})", name) from None
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=self.fd)
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except OSError as exc:  # a link swapped in since: refused, nothing followed
            raise self._error(f"cannot be opened as a folder without following a link ({exc.strerror or exc})",
                              name) from None
        return OutputDir(self.path / name, self.field, _fd=fd)

    def write(self, name: str, data: bytes | str) -> Path:
        """Write entry ``name``: a new file under a temporary name, renamed over the entry (whatever it was: a
        link or a hard link is replaced, not written through; readers never see half a file)."""
        _plain_name(name)
        raw = data.encode("utf-8") if isinstance(data, str) else data
        import secrets  # here: it imports hashlib and hmac (~5 ms of a gate that writes no file)

        tmp = f".{name}.kbase-{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=self.fd)
            try:
                _write_all(fd, raw)
            finally:
                os.close(fd)
            if self.kind(name) == "dir":
                raise IsADirectoryError(21, "is a folder")
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise self._error(f"cannot be written ({exc.strerror or exc})", name) from None
        return self.path / name

    def copy_in(self, name: str, source: Path) -> Path:
        """Write entry ``name`` with the bytes of kbase's own file ``source``."""
        return self.write(name, Path(source).read_bytes())


def _plain_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"not a plain file name: {name!r}")
