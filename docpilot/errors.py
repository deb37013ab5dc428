"""DocPilot's errors, one small tree.

    DocpilotError                 base; never escapes the CLI as a traceback
    ├── InputError                a golden set, probe file, corpus or config is wrong (exit 2)
    │   ├── ConfigError           a configuration value is wrong
    │   └── CorpusError           a docs folder cannot be read
    ├── ModelError                the model service failed for one record (the run goes on)
    ├── OrchestratorError         Prefect could not be reached or started (exit 2)
    ├── MissingExtraError         a feature's optional packages are not installed (exit 2)
    ├── ReportError               a report file cannot be read or written (exit 2)
    └── StorageError              the search index, the stage cache or a temporary file cannot
                                  be written: a full disk, a file-size limit (exit 2)

Every message says where (file, line, record), what was wrong, and what to do.
Only the CLI and the HTTP server turn these into exit or status codes.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

DISK_FULL = "the disk is full or the file too large"
"""What a write that found no room means, whichever way the system said it."""
DISK_FULL_FIX = "free some space on that disk or raise the file-size limit (`ulimit -f`), then run again"
"""What to do about it."""
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
# numpy and other C writers report a short write without an errno.
_SHORT_WRITE = re.compile(r"\b\d+ requested and \d+ written\b")
# SQLite says SQLITE_FULL only for ENOSPC; a file-size limit comes back as a write I/O error.
_FULL_SQLITE = frozenset({
    "SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_DIR_FSYNC",
    "SQLITE_IOERR_TRUNCATE", "SQLITE_IOERR_SHMSIZE",
})


class DocpilotError(Exception):
    """Base of every error DocPilot raises on purpose."""

    exit_code = 2


def _where(path: str | Path | None, line: int | None, record: str | None) -> str:
    parts = []
    if path is not None:
        parts.append(str(path) + (f":{line}" if line else ""))
    if record is not None:
        parts.append(f"record {record!r}")
    return ", ".join(parts)


class InputError(DocpilotError):
    """Something the user handed in cannot be used; the message says where and how to fix it."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        record: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.record = record
        self.hint = hint
        where = _where(path, line, record)
        text = f"{where}: {message}" if where else message
        if hint:
            text += f"\n  fix: {hint}"
        super().__init__(text)


class ConfigError(InputError):
    """A configuration file or option holds a value DocPilot cannot use."""


class CorpusError(InputError):
    """A docs folder or one of its pages cannot be read."""


class ModelError(DocpilotError):
    """A model call failed; the record is marked as errored and the run goes on."""

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        """The failed turn's error code (``docpilot.schema.ErrorCode``), when a turn failed."""


class UsageError(DocpilotError):
    """Options of a command that cannot go together (``--url`` without ``--runtime server``, say)."""


class OrchestratorError(DocpilotError):
    """Prefect's API could not be reached, or its temporary server did not start."""


class MissingExtraError(DocpilotError):
    """A feature needs packages of an extra (Prefect, Dask, the server stack) that are not installed."""


class ReportError(DocpilotError):
    """A report cannot be read or written."""


def fills_disk(exc: BaseException) -> bool:
    """Whether a failed write found no room: ENOSPC, EFBIG or EDQUOT, a short write, or SQLite's full disk."""
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS or (not exc.errno and bool(_SHORT_WRITE.search(str(exc))))
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        return name in _FULL_SQLITE
    return "database or disk is full" in str(exc)


class StorageError(DocpilotError):
    """A file DocPilot keeps for itself (the search index, the stage cache) could not be written.

    The message names what was being written and where, says whether the disk was full,
    and what was left as it was.
    """

    def __init__(self, what: str, path: str | Path, exc: BaseException, *, kept: str | None = None) -> None:
        self.what = what
        self.path = str(path)
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        if getattr(exc, "sqlite_errorname", None):
            detail += f", {exc.sqlite_errorname}"  # type: ignore[attr-defined]
        if fills_disk(exc):
            reason, fix = DISK_FULL, DISK_FULL_FIX
        else:
            reason = (exc.strerror if isinstance(exc, OSError) else None) or "the write failed"
            fix = "check that the folder exists, is writable and has room, then run again"
        text = f"{path}: cannot write the {what}: {reason} ({detail})"
        super().__init__(f"{text}; {kept}; fix: {fix}" if kept else f"{text}; fix: {fix}")
