"""The field report as one self-contained HTML page: the summary, then the gap table with each group's questions.

Every string from the log (questions, labels, section ids) is escaped: a log holds what
users typed.
"""

from __future__ import annotations

from html import escape
from typing import Any

from docpilot.field.markdown import _number

__all__ = ["field_html"]

_STYLE = """body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{border-bottom:1px solid #ddd;padding:.35rem .5rem;
text-align:left;vertical-align:top}th{background:#f4f4f4}.write{color:#9a3412;font-weight:600}
.missed{color:#1e40af;font-weight:600}details summary{cursor:pointer}ul{margin:.3rem 0;padding-left:1.2rem}"""


def field_html(report: dict[str, Any]) -> str:
    """The report as an HTML page."""
    summary = "".join(f"<tr><th>{escape(k)}</th><td>{escape(_number(v))}</td></tr>"
                      for k, v in report["summary"].items())
    rows = "".join(_group_row(g) for g in report["gaps"])
    gaps = (f"<table><tr><th>rank</th><th>asks</th><th>group</th><th>verdict</th><th>nearest sections</th>"
            f"<th>questions</th></tr>{rows}</table>" if rows else
            "<p>Every turn was answered with a citation, near a section of the docs.</p>")
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Questions from the field</title>"
            f"<style>{_STYLE}</style></head><body><h1>Questions from the field</h1>"
            f"<p>{escape(report['log'])}: {escape(_number(report['summary']['turns']))} turns, scored without gold "
            f"(corpus {escape(report['corpus'][:12])}).</p><table>{summary}</table>"
            f"<h2>Coverage gaps</h2>{gaps}</body></html>\n")


def _group_row(group: dict[str, Any]) -> str:
    kind = "write" if group["by"] == "words" else "missed"
    nearest = "".join(f"<li>{escape(n['section'])} ({n['score']:.2f})</li>" for n in group["nearest"]) or "<li>none</li>"
    questions = "".join(f"<li>{escape(q['question'])} ×{q['asks']}</li>" for q in group["questions"])
    more = len(group["questions"])
    return (f"<tr><td>{group['rank']}</td><td>{group['asks']}</td><td>{escape(group['label'])}</td>"
            f"<td class={kind}>{escape(group['verdict'])}</td><td><ul>{nearest}</ul></td>"
            f"<td><details><summary>{more} question{'s' if more != 1 else ''}</summary><ul>{questions}</ul>"
            f"</details></td></tr>")
