"""Writing a run's readable forms (``readout.formats``: HTML page, JUnit XML, Markdown summary) to files.

The renderers are pure (a readout in, text out); this module is where they meet the
file system, so ``docpilot eval --html/--junit/--markdown`` and ``docpilot report``
write through the same function.
"""

from __future__ import annotations

from pathlib import Path

from docpilot.readout.formats import FORMATS
from docpilot.readout.outcomes import Readout, prepare_readout
from docpilot.reports.output import write_atomically
from docpilot.schema import Report


def write_outputs(
    report: Report,
    *,
    report_path: str | Path | None = None,
    reports_dir: str | Path | None = None,
    **outputs: str | Path | None,
) -> dict[str, Path]:
    """Write the asked-for readable forms of ``report`` (``html=PATH``, …, see ``FORMATS``); returns format → path.

    Each file is written atomically. ``report_path`` and ``reports_dir`` say where
    to look for the previous comparable run (see ``prepare_readout``).
    """
    if not any(outputs.values()):
        return {}
    readout = prepare_readout(report, report_path=report_path, reports_dir=reports_dir)
    return write_readout(readout, **outputs)


def write_readout(readout: Readout, **outputs: str | Path | None) -> dict[str, Path]:
    """Write the asked-for forms of a prepared readout (``html=PATH``, …); returns format → path, in ``FORMATS`` order."""
    unknown = set(outputs) - set(FORMATS)
    if unknown:
        raise TypeError(f"no readable format {', '.join(sorted(unknown))}; formats: {', '.join(FORMATS)}")
    return {name: write_atomically(Path(outputs[name]), form.render(readout))
            for name, form in FORMATS.items() if outputs.get(name)}
