"""Times as people read them in the HTML report: `0.42 ms`, `4.1 ms`, `112 ms`, `1.25 s`, `11.2 s`.

The scorecard in the terminal prints every time in ms so columns line up; a page read
by eye (plot labels, the records table) says `11.2 s` rather than `11,246 ms` or a
plot's `11.2461k`.
"""

from __future__ import annotations

import math


def format_duration(ms: float | None) -> str:
    """A time in milliseconds as text with a unit: ms below a second, s above; ``n/a`` for none."""
    if ms is None or not math.isfinite(ms):
        return "n/a"
    if ms < 0:
        return "−" + format_duration(-ms)
    if ms == 0:
        return "0 ms"
    if ms < 10:
        return f"{ms:.2g} ms" if ms < 1 else f"{ms:.3g} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.3g} s"
    if seconds < 100:
        return f"{seconds:.1f} s"
    return f"{seconds:,.0f} s"


def format_tick(ms: float) -> str:
    """A plot's axis tick on the 1-2-5 ladder: `0.5 ms`, `20 ms`, `500 ms`, `2 s`."""
    if ms == 0:
        return "0"
    if ms < 1000:
        return f"{ms:g} ms"
    return f"{ms / 1000:g} s"
