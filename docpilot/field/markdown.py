"""The field report as Markdown: the summary's numbers, then the coverage gaps, most asked first."""

from __future__ import annotations

from typing import Any

__all__ = ["field_markdown"]

_SHOWN_GROUPS = 20
_SHOWN_QUESTIONS = 5


def _number(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:,.0f}"
    return f"{value:,}"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def field_markdown(report: dict[str, Any]) -> str:
    """The report as a Markdown page."""
    lines = [f"# Questions from the field: {_cell(report['log'])}", "",
             f"{_number(report['summary']['turns'])} turns, scored without gold against the docs "
             f"(corpus {report['corpus'][:12]}).", "", "| metric | value |", "|---|---|"]
    lines += [f"| {name} | {_number(value)} |" for name, value in report["summary"].items()]
    lines += ["", "## Coverage gaps", ""]
    if not report["gaps"]:
        lines.append("Every turn was answered with a citation, near a section of the docs.")
    else:
        lines += ["| rank | asks | group | verdict | nearest section | example questions |", "|---|---|---|---|---|---|"]
        for group in report["gaps"][:_SHOWN_GROUPS]:
            nearest = group["nearest"][0] if group["nearest"] else None
            near = f"{nearest['section']} ({nearest['score']:.2f})" if nearest else "none"
            asked = "; ".join(_cell(q["question"]) for q in group["questions"][:_SHOWN_QUESTIONS])
            lines.append(f"| {group['rank']} | {group['asks']} | {_cell(group['label'])} | {group['verdict']} "
                         f"| {_cell(near)} | {asked} |")
        if len(report["gaps"]) > _SHOWN_GROUPS:
            lines.append(f"\n{len(report['gaps']) - _SHOWN_GROUPS} more groups in the JSON report.")
    return "\n".join(lines) + "\n"
