"""The one way DocPilot writes an output file: checked first, then written whole or not at all.

Every file a command produces (the report JSON, its HTML, JUnit and Markdown forms,
a calibrated config) goes through ``write_atomically``: to a temporary file beside the
target, flushed to disk, then renamed over it, so a reader never sees half a file and
a crash leaves the previous one intact.

A rename replaces whatever the name pointed at, so the target is checked first: an
existing path that is not a regular file (``/dev/null``, ``/dev/full``, a folder, a
pipe, a socket) is refused, never swapped for a file; run as root, the rename would
otherwise replace the system's ``/dev/null``. A symbolic link is followed for the
check, and a link to a regular file is replaced by the new file. Missing parent
folders are created.

Mode: every output is created with ``0644`` less the process's umask (so ``0644``
under the usual umask 022, ``0600`` under 077). Outputs are meant to be read by other
people and tools (CI artifact uploads, web servers, reviewers), and they hold no
secrets, which are redacted before anything is stored (``docpilot.redact``);
a restrictive umask still makes them private. No output is ever group- or
world-writable, whatever the umask. The one exception is a user's own file that a
command edits in place (``docpilot calibrate`` and its config): it keeps its mode.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from docpilot.errors import DISK_FULL, DISK_FULL_FIX, ReportError, fills_disk

FILE_MODE = 0o644
"""The mode of every output file, before the umask is applied."""


def _umask() -> int:
    # Linux reports the umask without changing it; setting and restoring it would briefly
    # give files created by other threads mode 0666.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def file_mode() -> int:
    """The mode an output file gets in this process: ``FILE_MODE`` less the umask."""
    return FILE_MODE & ~_umask()


def check_output(path: str | Path, what: str = "output") -> Path:
    """Refuse a target that cannot be written or is not a regular file; ReportError names it and the fix.

    Call it before a run starts, so a bad ``--out`` fails in a second, not after the run.
    """
    path = Path(path)
    fix = f"give the {what} a path to a regular file (new or existing), such as reports/run{path.suffix}"
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        found = None
    except OSError as exc:
        raise ReportError(f"{path}: cannot check the {what} path: {exc.strerror or exc}; {fix}") from None
    if found is not None and not stat.S_ISREG(found.st_mode):
        kind = "a folder" if stat.S_ISDIR(found.st_mode) else "not a regular file (a device, pipe or socket)"
        raise ReportError(f"{path}: cannot write the {what}: the path is {kind}, and it is never replaced; {fix}")
    folder = _nearest_existing(path.parent)
    if not folder.is_dir():
        raise ReportError(f"{path}: cannot write the {what}: {folder} is not a folder; {fix}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ReportError(
            f"{path}: cannot write the {what}: the folder {folder} is not writable; choose a writable folder for it"
        )
    return path


def _nearest_existing(folder: Path) -> Path:
    folder = folder if str(folder) else Path(".")
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def write_atomically(path: str | Path, text: str, what: str = "output", *, mode: int | None = None) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically; returns the path.

    The file gets ``file_mode()``; ``mode`` overrides it for a user's own file edited in
    place (``docpilot calibrate`` keeps a config's mode).
    """
    path = check_output(path, what)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fchmod(handle.fileno(), file_mode() if mode is None else mode)  # mkstemp makes 0600 files
                os.fsync(handle.fileno())
            check_output(path, what)  # the name may have changed while the file was written
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        reason = DISK_FULL if fills_disk(exc) else exc.strerror or exc
        raise ReportError(
            f"{path}: cannot write the {what}: {reason} ({' '.join(str(exc).split())}); "
            f"nothing was written and any earlier file there is intact; fix: {os_fix(exc)}"
        ) from None
    return path


def os_fix(exc: OSError) -> str:
    """What to do about an operating-system error while writing."""
    if fills_disk(exc) and exc.errno != errno.EDQUOT:
        # ENOSPC, EFBIG (a file-size limit) and the short writes of C writers, which carry no errno.
        return DISK_FULL_FIX
    fixes = {
        errno.EDQUOT: "the disk quota is used up; free some space or write elsewhere",
        errno.EROFS: "the file system is read-only; write to another folder",
        errno.EACCES: "permission denied; choose a folder you can write to",
        errno.EPERM: "permission denied; choose a folder you can write to",
        errno.EMFILE: "too many open files; raise the limit with `ulimit -n`",
        errno.ENAMETOOLONG: "the path is too long; choose a shorter one",
    }
    return fixes.get(exc.errno or 0, "check that the folder exists and is writable")
