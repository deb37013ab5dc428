"""The HTML report of a run of several variants: the scorecard as a matrix, the paired verdict, and every question
across the variants.

One row per question, one column per variant, each cell coloured by the record's
outcome in that variant (``pass``, ``fail`` with its cause, ``error``); a row opens to
show the variants' answers side by side. Filters (by tag, and "variants disagree")
are added by the page's one script, allowed by its hash, as in the report of one run
(``readout.html``): every string from a model or a golden set is escaped, and the page
needs no network.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from importlib import resources

import jinja2
from markupsafe import Markup

from docpilot.readout.html import _escape, _OneLine  # noqa: PLC2701  one escaping rule for every page
from docpilot.readout.outcomes import RecordOutcome, prepare_readout
from docpilot.reports.compare import describe_p
from docpilot.reports.matrix import COST_ROWS
from docpilot.reports.scorecard import headline_metrics, with_interval
from docpilot.reports.stability import describe_flaky, stability_line
from docpilot.reports.variants import one_variant
from docpilot.schema import Report

_TEMPLATES = resources.files("docpilot.readout") / "templates"
_STYLE = (_TEMPLATES / "report.css").read_text(encoding="utf-8").strip() + (
    "td.cell{font-size:.85em}td.o-pass{background:#e3f4e6}td.o-fail{background:#fbe3e1}"
    "td.o-error{background:#f3e0f7}tr.q{cursor:pointer}tr.q:hover td{outline:1px solid #ccc}"
    ".side{display:grid;grid-template-columns:repeat(auto-fit,minmax(16em,1fr));gap:.8em}"
    ".answer{border:1px solid #ddd;border-left-width:4px;padding:.4em .6em;border-radius:4px}"
    ".answer.o-pass{border-left-color:#2e7d32}.answer.o-fail{border-left-color:#c62828}"
    ".answer.o-error{border-left-color:#8e24aa}.answer h3{margin:.1em 0;font-size:1em}"
    "td.d-better{color:#1a7f37}td.d-worse{color:#c62828}")
_SCRIPT = (_TEMPLATES / "matrix.js").read_text(encoding="utf-8").strip()
_MARK = {"better": "▲", "worse": "▼", "none": ""}


def content_security_policy() -> str:
    """No network, inline styles, and only the page's own script (by its hash)."""
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'; "
            "base-uri 'none'; form-action 'none'")


def render_matrix_html(report: Report) -> str:
    """The whole page for a report of several variants, as one string."""
    variants = report.variants or []
    names = [v.name for v in variants]
    outcomes = {name: prepare_readout(one_variant(report, name)).records for name in names}
    paired = report.paired
    cheapest = ""
    if paired is not None and paired.cheapest_not_worse:
        cheapest = (f"No worse than {names[0]} on any outcome: {', '.join(paired.not_worse)}; "
                    f"cheapest of them by {paired.cheapest_by}: {paired.cheapest_not_worse}.")
    return _template().render(
        report=report, names=names, policy=content_security_policy(), style=Markup(_STYLE),
        script=Markup(_SCRIPT), scorecard=_scorecard(report), paired=_paired(report), cheapest=cheapest,
        alpha=f"{paired.alpha:g}" if paired else "0.05",
        verdict_reads=(f"{paired.gate_variant}'s gates" if paired and paired.gate_variant else "every variant's gates"),
        tags=sorted({t for r in report.rows for t in r.tags}), questions=_questions(names, outcomes),
        stability=_stability(report),
    )


def _scorecard(report: Report) -> list[tuple[str, list[str]]]:
    variants = report.variants or []
    metrics = [m for m in (*headline_metrics(report), "errors", *COST_ROWS) if m in report.summary]
    table = [(m, [with_interval(m, v.summary.get(m), v.intervals) for v in variants]) for m in dict.fromkeys(metrics)]
    table.append(("verdict", [v.verdict for v in variants]))
    return table


def _stability(report: Report) -> list[dict]:
    """Each variant that asked several samples per record: its stability line and its flaky records."""
    return [{"variant": v.name, "line": stability_line(v), "flaky": [describe_flaky(r) for r in v.stability.flaky]}
            for v in report.variants or [] if v.stability is not None]


def _paired(report: Report) -> list[tuple[str, str, list[dict]]]:
    paired = report.paired
    if paired is None:
        return []
    others = [v.name for v in report.variants or []][1:]
    table = []
    for outcome in dict.fromkeys(t.outcome for t in paired.tests):
        cells, kind = [], ""
        for name in others:
            test = next((t for t in paired.tests if t.variant == name and t.outcome == outcome), None)
            if test is None or test.effect is None:
                cells.append({"text": "n/a", "direction": "none"})
                continue
            kind = test.test
            p = "same" if test.p_holm is None else f"p {describe_p(test.p_holm)}"
            seen = f", could see ±{test.detectable:.3f}" if test.detectable is not None else ""  # no evidence
            cells.append({"text": f"{_MARK[test.direction]}{test.effect:+.3f} ({p}{seen})",
                          "direction": test.direction})
        table.append((outcome, kind, cells))
    return table


def _cell(name: str, record: RecordOutcome | None) -> dict:
    if record is None:
        return {"variant": name, "outcome": "missing", "label": "—", "title": "not in this variant",
                "answer": None, "citations": [], "error": None}
    row = record.row
    if row.error is not None:
        outcome, label = "error", "error"
    elif record.failing:
        outcome, label = "fail", record.cause or "gate"
    else:
        outcome, label = "pass", "refused" if row.refused else "pass"
    return {"variant": name, "outcome": outcome, "label": label, "title": record.detail or label,
            "answer": row.answer, "citations": row.citations, "error": row.error}


def _questions(names: list[str], outcomes: dict[str, list[RecordOutcome]]) -> list[dict]:
    by_id = {name: {r.row.id: r for r in records} for name, records in outcomes.items()}
    order = list(dict.fromkeys(r.row.id for records in outcomes.values() for r in records))
    questions = []
    for rid in order:
        first = next(by_id[n][rid] for n in names if rid in by_id[n])
        cells = [_cell(name, by_id[name].get(rid)) for name in names]
        questions.append({"id": rid, "question": first.row.question, "tags": first.row.tags, "cells": cells,
                          "disagree": len({c["outcome"] for c in cells}) > 1})
    return questions


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("docpilot.readout", "templates"), autoescape=True,
                             finalize=_escape, undefined=jinja2.StrictUndefined, extensions=[_OneLine])
    return env.get_template("matrix.html")
