"""The readable forms a report can be written in, as data: a new format is one renderer module and one entry.

Both commands that write them (``docpilot eval`` and ``docpilot report``) take one
option per entry (``--html``, ``--junit``, ``--markdown``, …), and ``readout.files``
writes each through the one output writer. The entries name their renderer's module
rather than import it, so a command that writes no page loads no template.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docpilot.readout.outcomes import Readout


@dataclass(frozen=True)
class Format:
    """One readable form of a report."""

    renderer: str
    """``module:function`` that turns a ``Readout`` into the file's text."""
    what: str
    """What the file is, for messages: ``HTML report``."""
    help: str
    """What the option writes, for ``--help``."""
    suffix: str
    """The file name's usual ending."""
    to_stdout: bool = False
    """``-`` as the path prints it (``docpilot report`` only)."""

    def render(self, readout: Readout) -> str:
        module, _, function = self.renderer.partition(":")
        render: Callable[[Readout], str] = getattr(importlib.import_module(module), function)
        return render(readout)


FORMATS: dict[str, Format] = {
    "html": Format("docpilot.readout.html:render_html", "HTML report", "the self-contained HTML report", ".html"),
    "junit": Format("docpilot.readout.junit:render_junit", "JUnit XML",
                    "JUnit XML (one test per record and per gate)", ".xml"),
    "markdown": Format("docpilot.readout.markdown:render_markdown", "Markdown summary", "a Markdown summary", ".md",
                       to_stdout=True),
}
"""Every format, by the name of its option (``--NAME PATH``)."""
