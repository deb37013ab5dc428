"""Reading a file a user named: opened once, a regular file, and no larger than its kind allows.

Every file DocPilot reads on a user's word (a config, a golden set, attack probes, a
report, a docs page, ``vocabulary.json``, ``llms.txt``) comes through ``read_bytes``.
A path is not always a file: ``/dev/zero`` never ends, a named pipe (FIFO) waits for
a writer that may never come, and a folder has no text. So the path is opened without
waiting (``O_NONBLOCK``: opening a FIFO returns at once instead of blocking until
someone writes), the opened descriptor is asked what it is (``fstat``, so what is
checked is what is read, even if the path changes meanwhile), and only a regular file
is read, and only up to its kind's cap. A symbolic link to a regular file is read as
that file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from docpilot.errors import DocpilotError, InputError

MiB = 1024 * 1024

ErrorFactory = Callable[..., DocpilotError]
"""What builds the error a reader raises: an InputError subclass, or any callable taking
``(message, *, path, line=None, hint=None)``."""


@dataclass(frozen=True)
class FileKind:
    """What a file is for, and the most bytes such a file may hold."""

    name: str
    """How messages name the file: `config file`, `golden set`, ..."""
    limit: int
    """Most bytes it may hold; a larger file is refused before it is read."""
    fix: str
    """What to do with a file over the limit."""


CONFIG_FILE = FileKind("config file", 1 * MiB,
                       "a config holds a few dozen options; check that the path names the config file")
GOLDEN_SET = FileKind("golden set", 64 * MiB, "split the records into several golden sets and run each")
PROBE_FILE = FileKind("probe file", 64 * MiB, "split the probes into several files and run each")
DOCS_FILE = FileKind("docs file", 8 * MiB, "split the page into several pages")
REPORT_FILE = FileKind("report", 512 * MiB, "check that the path names a report written by `docpilot eval`")

KINDS = (CONFIG_FILE, GOLDEN_SET, PROBE_FILE, DOCS_FILE, REPORT_FILE)
"""Every kind of file read on a user's word, for the docs and the tests."""

_FIRST_READ_SLACK = 1  # one byte past the size asked for shows whether the file grew past it
_CHUNK = 4 * MiB


def read_bytes(path: Path, kind: FileKind, *, error: ErrorFactory = InputError,
               missing: str = "check the path; a relative path starts at the working directory") -> bytes:
    """The bytes of the regular file at ``path``; anything else raises ``error`` naming the path and the fix.

    ``missing`` is the fix shown when nothing is at the path.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise error("file not found", path=path, hint=missing) from None
    except IsADirectoryError:
        raise error("is a folder, not a file", path=path, hint="point at the file inside it") from None
    except OSError as exc:
        raise unopenable(path, exc, error) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise not_regular(path, info.st_mode, kind, error)
        if info.st_size > kind.limit:
            raise _too_big(path, kind, error, f"is {info.st_size:,} bytes")
        return _read_within(fd, path, kind, info.st_size, error)
    except OSError as exc:
        raise error(f"cannot be read: {exc.strerror or exc}", path=path, hint="check the file's permissions") from None
    finally:
        os.close(fd)


def read_text(path: Path, kind: FileKind, *, error: ErrorFactory = InputError) -> str:
    """The UTF-8 text of the regular file at ``path`` (a byte-order mark dropped), read as ``read_bytes`` reads it."""
    data = read_bytes(path, kind, error=error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        offset = exc.start
        raise error(
            f"is not UTF-8: byte 0x{data[offset]:02x} at byte offset {offset} cannot be decoded",
            path=path,
            line=data.count(b"\n", 0, offset) + 1,
            hint="save the file as UTF-8 (most editors offer this under 'Save with encoding')",
        ) from None


def _read_within(fd: int, path: Path, kind: FileKind, size: int, error: ErrorFactory) -> bytes:
    """Every byte to the end, refusing the file the moment it holds more than its kind's limit.

    The size the file had when opened is read in one call, so the usual file costs one
    read and one copy; a file that grows while it is read, or one that reports no
    size (such as those under /proc), is read on in chunks up to the limit.
    """
    parts: list[bytes] = []
    total = 0
    want = min(size, kind.limit) + _FIRST_READ_SLACK
    while True:
        part = os.read(fd, want)
        if not part:
            return b"".join(parts)
        parts.append(part)
        total += len(part)
        if total > kind.limit:
            raise _too_big(path, kind, error, "grew while it was read, to more than that")
        want = min(_CHUNK, kind.limit + 1 - total)


def not_regular(path: Path, mode: int, kind: FileKind, error: ErrorFactory = InputError) -> DocpilotError:
    """The error for a ``kind`` file at ``path`` whose ``st_mode`` is ``mode``, not a regular file's."""
    if stat.S_ISDIR(mode):
        return error("is a folder, not a file", path=path, hint="point at the file inside it")
    hint = f"name a regular file holding the {kind.name} (for the output of a pipe: `cmd > file`)"
    return error(f"is {_node_kind(mode)}, not a regular file: a {kind.name} is read only from a regular file",
                 path=path, hint=hint)


def _node_kind(mode: int) -> str:
    return {
        stat.S_IFIFO: "a named pipe (FIFO)",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFSOCK: "a socket",
    }.get(stat.S_IFMT(mode), "a special file")


def unopenable(path: Path, exc: OSError, error: ErrorFactory = InputError) -> DocpilotError:
    """The error for a path that cannot be opened or followed: a link that leads back to itself, a socket, no permission."""
    if exc.errno == errno.ENXIO:  # a socket, or a device with no driver behind it, cannot be opened at all
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = 0
        return error(f"is {_node_kind(mode)}, not a regular file", path=path, hint="name a regular file")
    if exc.errno == errno.ELOOP:
        return error("is a symbolic link that leads back to itself", path=path,
                     hint="point the link at a file, or name the file itself")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return error("cannot be read: permission denied", path=path, hint="check the file's permissions")
    return error(f"cannot be opened: {exc.strerror or exc}", path=path, hint="check the path and its permissions")


def _too_big(path: Path, kind: FileKind, error: ErrorFactory, found: str) -> DocpilotError:
    return error(f"{found}, more than the {_size(kind.limit)} a {kind.name} may hold", path=path, hint=kind.fix)


def _size(count: int) -> str:
    """A limit as people read it: `64 MiB`, else its bytes."""
    return f"{count // MiB} MiB" if count % MiB == 0 else f"{count:,} bytes"
