"""Writing a run's readable forms (HTML page, JUnit XML, Markdown summary) to files.

The renderers are pure (a readout in, text out); this module is where they meet the
file system, so ``docpilot eval --html/--junit/--markdown`` and ``docpilot report``
write through the same function.
"""

from __future__ import annotations

from pathlib import Path

from docpilot.readout.html import render_html
from docpilot.readout.junit import render_junit
from docpilot.readout.markdown import render_markdown
from docpilot.readout.outcomes import Readout, prepare_readout
from docpilot.reports.output import write_atomically
from docpilot.schema import Report

RENDERERS = {"html": render_html, "junit": render_junit, "markdown": render_markdown}
"""Format name → the function that renders a readout in it."""


def write_outputs(
    report: Report,
    *,
    html: str | Path | None = None,
    junit: str | Path | None = None,
    markdown: str | Path | None = None,
    report_path: str | Path | None = None,
    reports_dir: str | Path | None = None,
) -> dict[str, Path]:
    """Write the asked-for readable forms of ``report``; returns format (html, junit, markdown) → path.

    Each file is written atomically. ``report_path`` and ``reports_dir`` say where
    to look for the previous comparable run (see ``prepare_readout``).
    """
    if not (html or junit or markdown):
        return {}
    if report.variants:
        return _write_variants(report, html=html, junit=junit, markdown=markdown)
    readout = prepare_readout(report, report_path=report_path, reports_dir=reports_dir)
    return write_readout(readout, html=html, junit=junit, markdown=markdown)


def write_readout(
    readout: Readout,
    *,
    html: str | Path | None = None,
    junit: str | Path | None = None,
    markdown: str | Path | None = None,
) -> dict[str, Path]:
    """Write the asked-for forms of a prepared readout; returns format → path, in that order."""
    targets = {name: Path(p) for name, p in (("html", html), ("junit", junit), ("markdown", markdown)) if p}
    return {name: write_atomically(path, RENDERERS[name](readout)) for name, path in targets.items()}


def _write_variants(report: Report, *, html, junit, markdown) -> dict[str, Path]:
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
    targets = {name: Path(p) for name, p in (("html", html), ("junit", junit), ("markdown", markdown)) if p}
    return {name: write_atomically(path, render[name]()) for name, path in targets.items()}
