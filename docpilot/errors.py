"""DocPilot's errors, one small tree.

    DocpilotError                 base; never escapes the CLI as a traceback
    ├── InputError                a golden set, probe file, corpus or config is wrong (exit 2)
    │   ├── ConfigError           a configuration value is wrong
    │   └── CorpusError           a docs folder cannot be read
    ├── ModelError                the model service failed for one record (the run goes on)
    ├── OrchestratorError         Prefect could not be reached or started (exit 2)
    └── ReportError               a report file cannot be read or written (exit 2)

Every message says where (file, line, record), what was wrong, and what to do.
Only the CLI and the HTTP server turn these into exit or status codes.
"""

from __future__ import annotations

from pathlib import Path


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


class OrchestratorError(DocpilotError):
    """Prefect's API could not be reached, or its temporary server did not start."""


class ReportError(DocpilotError):
    """A report cannot be read or written."""
