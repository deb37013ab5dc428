"""The HTML report's trend section: each headline metric across the stored runs of the series, as inline SVG.

One plot per metric: the runs of the series evenly spaced left to right (oldest
first, the report's own run last), the metric's value as a line, and at every run
where it moved beyond its noise floor a marker coloured by the move's verdict and
labelled with what changed there (``config``, ``corpus``, ``model``, ``code``). The
marker's tooltip holds the move and the whole cause in ``docpilot improve
compare``'s words. Like ``docpilot.readout.svg``, every text placed goes through
``html.escape`` and a plot with nothing to draw says so.
"""

from __future__ import annotations

import html
import math
import sqlite3
from pathlib import Path

from docpilot.history.index import RunIndex
from docpilot.history.timeline import MoveData, Step, Timeline, build_timeline
from docpilot.readout.svg import HEIGHT, WIDTH
from docpilot.reports.scorecard import format_value, headline_metrics
from docpilot.schema import Report

TREND_RUNS = 30
"""Runs a trend plot shows at most: the report's own run and the ones before it."""

_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 16, 40, 40  # margins; the top band holds two rows of cause labels


def report_trend(report: Report, folders: list[Path]) -> Timeline | None:
    """The series of ``report`` up to it, from the run index of the first folder that holds the run; None if none does.

    A folder is asked only when it already has a run index (every ``docpilot eval``
    makes one beside its reports), so rendering a report copied elsewhere leaves
    that folder as it was.
    """
    for folder in folders:
        index = RunIndex(folder)
        if not index.path.is_file():
            continue
        try:
            index.refresh()
            run = next((r for r in index.runs() if r.run_id == report.run_id), None)
            if run is not None:
                return build_timeline(index, headline_metrics(report), last=TREND_RUNS, latest=run)
        except (sqlite3.Error, OSError):
            continue  # the trend is a picture of the index; the report's own pages stand without it
    return None


def trend_figures(timeline: Timeline) -> list[tuple[str, str]]:
    """One (caption, SVG) per metric of the timeline."""
    return [(metric, trend_plot(metric, timeline.steps)) for metric in timeline.metrics]


def trend_plot(metric: str, steps: list[Step]) -> str:
    """A line of ``metric`` over ``steps``, with each move marked and labelled with its cause."""
    title = f"{metric} over the last {len(steps)} runs"
    values = [step.run.summary.get(metric) for step in steps]
    known = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not known:
        return (_open(title) + f'<text class="nodata" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
                "no data</text></svg>")
    low, high = min(known), max(known)
    ticks: tuple[float, ...] = (low, high)
    if high - low < 1e-9:
        # A flat line sits at mid height with its one value marked: no tick names a value never seen.
        ticks, spread = (low,), max(abs(low) * 0.5, 0.5)
        low, high = low - spread, high + spread
    pad = (high - low) * 0.1
    low, high = low - pad, high + pad
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(i: int) -> float:
        return _LEFT + (plot_w / 2 if len(steps) == 1 else i / (len(steps) - 1) * plot_w)

    def y(v: float) -> float:
        return _TOP + (1 - (v - low) / (high - low)) * plot_h

    parts = [_open(title)]
    for tick in ticks:
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>')
        parts.append(f'<text class="tick" x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">'
                     f"{html.escape(format_value(metric, tick))}</text>")
    for i in (0, len(steps) - 1) if len(steps) > 1 else (0,):
        anchor = "start" if i == 0 and len(steps) > 1 else "end" if len(steps) > 1 else "middle"
        parts.append(f'<text class="tick" x="{x(i):.1f}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="{anchor}">'
                     f"{html.escape(steps[i].run.created_at[:10])}</text>")
    parts.append(f'<text class="axis" x="{_LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                 f"runs of the series, oldest first (n = {len(steps)})</text>")
    segments, pen = [], "M"
    for i, value in enumerate(values):
        if value is None or not math.isfinite(value):
            pen = "M"  # a run without a value breaks the line rather than bridging it
            continue
        segments.append(f"{pen}{x(i):.1f},{y(float(value)):.1f}")
        pen = "L"
    parts.append(f'<path class="line" d="{" ".join(segments)}"/>')
    markers = 0  # neighbouring moves' labels take turns between the two rows of the top band
    for i, (step, value) in enumerate(zip(steps, values, strict=True)):
        if value is None or not math.isfinite(value):
            continue
        move = step.moves[metric]
        run = html.escape(f"run {step.run.run_id} ({step.run.created_at}): {format_value(metric, value)}")
        if metric in step.moved and step.cause is not None:
            parts.append(_move_marker(x(i), y(float(value)), step.cause, move, run, plot_w, row=markers % 2))
            markers += 1
        else:
            parts.append(f'<circle class="dot" cx="{x(i):.1f}" cy="{y(float(value)):.1f}" r="2.5">'
                         f"<title>{run}</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def _move_marker(cx: float, cy: float, cause: dict, move: MoveData, run: str, plot_w: float, *, row: int) -> str:
    verdict = move["change"] if move["change"] in ("better", "worse") else "unknown"
    tip = html.escape("\n".join([move["text"], *cause["lines"]]))
    label = html.escape(", ".join(cause["changed"]) or "no change")
    # Labels near either edge read inwards, so they stay inside the plot.
    anchor = "start" if cx < _LEFT + plot_w * 0.15 else "end" if cx > _LEFT + plot_w * 0.85 else "middle"
    return (f'<g class="move {verdict}"><line class="marker" x1="{cx:.1f}" x2="{cx:.1f}" y1="{_TOP - 10}" '
            f'y2="{HEIGHT - _BOTTOM}"/><circle class="dot {verdict}" cx="{cx:.1f}" cy="{cy:.1f}" r="5">'
            f"<title>{run}\n{tip}</title></circle>"
            f'<text class="label cause" x="{cx:.1f}" y="{_TOP - 14 - 11 * row}" text-anchor="{anchor}">{label}'
            f"<title>{tip}</title></text></g>")


def _open(title: str) -> str:
    safe = html.escape(title)
    return (f'<svg class="plot trend" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'role="img" aria-label="{safe}"><title>{safe}</title>')
