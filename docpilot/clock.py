"""How long this command has been running: the wall time a user waits, start-up included."""

from __future__ import annotations

import os
import time

_IMPORTED = time.perf_counter()
_IMPORTED_AGE_S: float | None = None


def _age_from_proc() -> float | None:
    """Seconds since this process started, from /proc (Linux); None elsewhere."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rpartition(")")[2].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            up = float(uptime.read().split()[0])
        # Field 22 of stat (the 20th after the command name) is the start, in clock ticks after boot.
        return max(0.0, up - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def command_ms() -> float:
    """Milliseconds since the process started (interpreter start-up and imports included).

    Where the start is not known (no /proc), since this module was first imported,
    which the CLI does before it imports anything heavy.
    """
    global _IMPORTED_AGE_S
    if _IMPORTED_AGE_S is None:
        _IMPORTED_AGE_S = _age_from_proc() or 0.0
    return (_IMPORTED_AGE_S + time.perf_counter() - _IMPORTED) * 1000
