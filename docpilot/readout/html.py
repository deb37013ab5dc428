"""The HTML report: one self-contained page a person reads to see how a run went and why records failed.

The page needs no network and no script to show everything: styles and plots are
inline, and a small script only adds filters to the records table. The page is a
Jinja template (``templates/report.html``) with autoescaping on, so every string
that came from a model or a golden set is escaped unless this module marked it as
markup; a Content-Security-Policy allows no script but the page's own (by its hash),
so an answer that carries ``<script>`` or an ``onerror=`` attribute shows as text and
runs nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2
from jinja2.ext import Extension
from markupsafe import Markup

from docpilot.assistant.render import render_panel
from docpilot.corpus.pages import section_url
from docpilot.metrics import registry
from docpilot.metrics.gold import is_relevant
from docpilot.models.base import Source
from docpilot.readout.answer_markup import render_answer
from docpilot.readout.durations import format_duration
from docpilot.readout.outcomes import Readout, RecordOutcome
from docpilot.readout.svg import histogram, recall_curve
from docpilot.readout.trend import trend_figures
from docpilot.reports.scorecard import format_gate_value, format_value, headline_metrics, shown_metrics
from docpilot.reports.stability import stability_line
from docpilot.schema import Report, Row

MAX_DETAILS = 300
"""Failing records shown in full; beyond this the table still lists every record."""

_BOUNDS = {"over_refusal_gate": "over_refusal_gate_upper95", "over_refusal_answer": "over_refusal_answer_upper95"}
_DEFAULT_BASE_URL = "https://docpilot.dev/docs/"
_TIMES = ("latency_", "first_token_", "stage_")  # metrics that are times, in ms
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # shown as U+FFFD, not as invisible bytes
_TEMPLATES = resources.files("docpilot.readout") / "templates"
_STYLE = (_TEMPLATES / "report.css").read_text(encoding="utf-8").strip()
# Shows the filter controls (hidden without a script, where they could do nothing)
# and hides table rows that do not match them.
_SCRIPT = (_TEMPLATES / "filters.js").read_text(encoding="utf-8").strip()


def script_hash() -> str:
    """The CSP source (``'sha256-…'``) that allows the page's own script and nothing else."""
    digest = hashlib.sha256(_SCRIPT.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def content_security_policy() -> str:
    """The page's policy: no network at all, inline styles, data: images, and only its own script."""
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_hash()}; "
            "base-uri 'none'; form-action 'none'")


def render_html(readout: Readout) -> str:
    """The whole page for a readout, as one string."""
    report = readout.report
    shown, left_off = shown_metrics(report, report.summary)
    return _template().render(
        readout=readout,
        report=report,
        policy=content_security_policy(),
        style=Markup(_STYLE),
        script=Markup(_SCRIPT),
        facts=_facts(report),
        anchors={r.row.id: r.anchor for r in readout.records},
        figures=_figures(report),
        trend=[(name, Markup(svg)) for name, svg in trend_figures(readout.trend)] if readout.trend else [],
        with_moves=bool(readout.moves),
        scorecard=_scorecard(readout, shown),
        left_off=left_off,
        stability_line=stability_line(report),
        headline=headline_metrics(report),
        kinds=sorted({r.kind for r in report.rows}),
        splits=sorted({r.split for r in report.rows}),
        columns=_COLUMNS,
        detailed={r.anchor for r in readout.failing[:MAX_DETAILS]},
        shown=readout.failing[:MAX_DETAILS],
        more=max(len(readout.failing) - MAX_DETAILS, 0),
        panel=lambda row: _answer_panel(row, report),
    )


# The records table: column heading, and whether it holds a number (right-aligned).
_COLUMNS = (("id", False), ("question", False), ("kind", False), ("split", False), ("recall@8 (rank)", False),
            ("answer F1", True), ("refused", False), ("citations", True), ("latency", True), ("cause", False))


class _OneLine(Extension):
    """Joins a template's lines with their indentation stripped: the page is one line, the template readable."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return "".join(line.strip() for line in source.splitlines())


def _escape(value: object) -> Markup:
    """Every value the template prints: markup as it is, anything else escaped as text.

    Control characters become U+FFFD, and quotes are escaped as ``&quot;``/``&#x27;``
    (the standard library's entities), which the escaping tests pin.
    """
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(_CONTROL.sub("\ufffd", str(value)), quote=True))


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("docpilot.readout", "templates"),
        autoescape=True,
        finalize=_escape,
        undefined=jinja2.StrictUndefined,
        extensions=[_OneLine],
    )
    env.globals.update(
        value=_value,
        gate_value=format_gate_value,  # in the gate's own unit (ms), with the digits that decide it
        duration=_duration,
        reasons=_reasons,
        deeper_rank=_deeper_rank,
        gate_labels=lambda record: ", ".join(f"gate {g}" for g in record.gates),
        codes=_codes,
        is_relevant=is_relevant,
        primed_numbers=lambda row: {section: n for n, section in enumerate(row.primed, start=1)},
        NUM=Markup(' class="num"'),
        FAILING=Markup(' class="failing"'),
        GOLD=Markup(' class="gold"'),
    )
    return env.get_template("report.html")


def _duration(ms: float | None) -> str:
    return format_duration(ms)


def _value(metric: str, value: float | int | None) -> str:
    """A metric's value on the page: the scorecard's rule, but times in ms or s as people read them."""
    if value is not None and metric.startswith(_TIMES):
        return format_duration(value)
    return format_value(metric, value)


def _deeper_rank(row: Row) -> str:
    """Where a miss's first gold section sits past the top 8: ` (rank 12)`, ` (not in 100)`; empty when unknown."""
    if row.gold_rank is not None:
        return f" (rank {row.gold_rank})"
    return f" (not in {row.gold_depth})" if row.gold_depth else ""


def _reasons(record: RecordOutcome) -> str:
    return ", ".join(([record.cause] if record.cause else []) + [f"gate {g}" for g in record.gates])


def _codes(values: Iterable[str]) -> Markup:
    return Markup(", ").join(Markup("<code>{}</code>").format(_escape(v)) for v in values)


def _facts(report: Report) -> list[tuple[str, object]]:
    model = (report.config or {}).get("model") or {}
    model_name = "none (gate-only)" if report.gate_only else f"{model.get('provider', '?')} / {model.get('name', '?')}"
    chosen = [] if report.selection.everything else [("selection", report.selection.describe())]
    return [
        ("run", report.run_id), ("created", report.created_at), ("set", report.set), ("split", report.split),
        *chosen, ("records", len(report.rows)), ("gate-only", "yes" if report.gate_only else "no"),
        ("runtime", report.runtime), ("orchestrator", report.orchestrator),
        ("wall time", _duration(report.wall_ms)), ("model", model_name),
    ]


def _scorecard(readout: Readout, shown: set[str]) -> list[dict[str, Any]]:
    """The scorecard's rows, one group per family, families in order of first appearance.

    Grouping by family rather than by runs of it keeps one heading per family: the
    summary lists ``errors`` (an answer metric) after the citation metrics.
    """
    report = readout.report
    groups: dict[str, dict[str, Any]] = {}
    for metric, value in report.summary.items():
        if metric in _BOUNDS.values() or metric not in shown:
            continue
        known = registry.is_metric_id(metric)
        family = registry.get(metric).family if known else "other"
        group = groups.setdefault(family, {"family": family, "lines": []})
        group["lines"].append({
            "metric": metric, "value": value, "n": report.counts.get(metric),
            "bound": report.summary.get(_BOUNDS[metric]) if metric in _BOUNDS else None,
            "interval": report.intervals.get(metric),  # page-clustered (metrics.intervals)
            "move": readout.moves.get(metric), "move_text": _move_text(metric, readout),
            "description": registry.get(metric).description if known else "",
        })
    return list(groups.values())


def _move_text(metric: str, readout: Readout) -> str:
    move = readout.moves.get(metric)
    if move is None:
        return ""
    return move.text(_value(metric, abs(move.delta or 0.0)))


def _figures(report: Report) -> list[tuple[str, Markup]]:
    points = [(k, report.summary.get(f"recall@{k}")) for k in (1, 3, 5, 8)]
    # Each histogram plots the very values its percentiles are taken over, so its n and its
    # p50/p95 marks are the scorecard's.
    latencies = _metric_values("latency_p50", report.rows)
    first = _metric_values("first_token_p50", report.rows)
    # The plots are built by docpilot.readout.svg, which escapes every text it places.
    return [
        ("Recall at k", Markup(recall_curve(points))),
        ("Turn latency", Markup(histogram(latencies, title="turn latency"))),
        ("Time to first token", Markup(histogram(first, title="time to first token"))),
    ]


def _metric_values(metric_id: str, rows: list[Row]) -> list[float]:
    """The values a metric aggregates: its own population's rows, each scored by its own function."""
    metric = registry.get(metric_id)
    return [metric.score(row) for row in rows if metric.population.includes(row)]


def _cites_apart(report: Report) -> bool:
    """Whether the run measured a target that lists what an answer cites apart from its text (``reply.citations``)."""
    config = report.config or {}
    target = (config.get("targets") or {}).get(config.get("target") or "") or {}
    return bool((target.get("reply") or {}).get("citations"))


def _answer_panel(row: Row, report: Report) -> Markup:
    """The answer as the reader saw it, re-rendered from the row with the panel's own renderer."""
    if row.answer is None and not row.refused:
        why = "no model ran (retrieval only)" if report.gate_only else "no answer"
        return Markup('<span class="note">{}</span>').format(_escape(why))
    base_url = str(((report.config or {}).get("corpus") or {}).get("base_url") or _DEFAULT_BASE_URL)
    sources = [Source(n=n, section_id=s, title=s, text="") for n, s in enumerate(row.primed, start=1)]
    cited = row.citations if _cites_apart(report) else None  # a target listing its citations apart

    def link(section_id: str) -> str:  # a source the docs do not hold links where the assistant said it lives
        given = row.outside_links.get(section_id, "")
        return given if given.startswith(("https://", "http://")) else section_url(section_id, base_url)

    panel = render_panel(row.answer or "", sources, link, refused=row.refused, cited=cited)
    if row.refused:
        return Markup(panel.html)  # the panel renderer escapes the answer itself
    # The panel decides which sources show; the answer itself is read as Markdown, escaped.
    links = {str(s.n): link(s.section_id) for s in sources}
    body = render_answer(row.answer or "", links, set(row.primed))
    rows = "".join(f'<li><a href="{html.escape(r.url, quote=True)}">[{r.n}] {html.escape(r.title)}</a></li>'
                   for r in panel.sources)
    return Markup('<div class="panel">' + body + (f'<ol class="sources">{rows}</ol>' if rows else "") + "</div>")
