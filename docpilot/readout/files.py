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
    if report.variants:
        return _write_variants(report, **outputs)
    readout = prepare_readout(report, report_path=report_path, reports_dir=reports_dir)
    return write_readout(readout, **outputs)


def write_readout(readout: Readout, **outputs: str | Path | None) -> dict[str, Path]:
    """Write the asked-for forms of a prepared readout (``html=PATH``, …); returns format → path, in ``FORMATS`` order."""
    unknown = set(outputs) - set(FORMATS)
    if unknown:
        raise TypeError(f"no readable format {', '.join(sorted(unknown))}; formats: {', '.join(FORMATS)}")
    return {name: write_atomically(Path(outputs[name]), form.render(readout))
            for name, form in FORMATS.items() if outputs.get(name)}


def _write_variants(report: Report, **outputs: str | Path | None) -> dict[str, Path]:
    """The readable forms of a run of several variants: the matrix page, a JUnit suite per variant, a matrix table."""
    from docpilot.readout.junit import render_junit_variants
    from docpilot.readout.markdown import render_markdown_variants
    from docpilot.readout.matrix import render_matrix_html
    from docpilot.reports.variants import one_variant, variant_names

    render = {
        "html": lambda: render_matrix_html(report),
        "junit": lambda: render_junit_variants([(name, prepare_readout(one_variant(report, name)))
                                                for name in variant_names(report)]),
        "markdown": lambda: render_markdown_variants(report),
    }
    unknown = {name for name, path in outputs.items() if path} - set(render)
    if unknown:
        raise TypeError(f"no matrix form of {', '.join(sorted(unknown))}; forms: {', '.join(render)}")
    return {name: write_atomically(Path(outputs[name]), render[name]())
            for name in FORMATS if outputs.get(name)}
