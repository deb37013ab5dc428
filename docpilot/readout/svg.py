"""The HTML report's plots, drawn as inline SVG strings: a recall@k curve and time histograms.

The report must open from a file with no network, so the plots are hand-built SVG
rather than a charting library's script. Every piece of text placed in a plot goes
through ``html.escape``. A plot with nothing to draw says so instead of drawing empty
axes, so "no data" is never mistaken for "all zero".
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from docpilot.metrics.latency import percentile
from docpilot.readout.durations import format_duration, format_tick

WIDTH = 440
"""Width of every plot, in SVG user units (the page scales it to its column)."""

HEIGHT = 220
"""Height of every plot."""

_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 16, 18, 40  # margins around the plotting area
# The histograms keep a band above the bars for the p50 and p95 labels, one line each,
# so a label never sits on a bar, however tall.
_LABEL_BAND = 26

# Bin edges of the time histograms, in ms: a 1-2-5 ladder, so a run of 1 ms turns and
# one of 20 s turns both get readable bins without a scale chosen per run.
_LADDER: tuple[float, ...] = (0.0, *(m * 10.0**e for e in range(-2, 8) for m in (1, 2, 5)))
_MIN_BINS = 4


def recall_curve(points: Sequence[tuple[int, float | None]], *, title: str = "recall@k") -> str:
    """A line plot of recall against k (x spaced by k itself), y from 0 to 1.

    ``points`` are ``(k, value)`` pairs; a None value (nothing to average over) is
    left out, and with no value at all the plot is a "no data" note.
    """
    known = [(k, v) for k, v in points if v is not None]
    if not known:
        return _empty(title)
    ks = [k for k, _ in points]
    k_lo, k_hi = min(ks), max(ks)
    span = max(k_hi - k_lo, 1)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(k: int) -> float:
        return _LEFT + (k - k_lo) / span * plot_w

    def y(v: float) -> float:
        return _TOP + (1 - min(max(v, 0.0), 1.0)) * plot_h

    parts = [_open(title)]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>')
        parts.append(f'<text class="tick" x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    for k in ks:
        parts.append(f'<text class="tick" x="{x(k):.1f}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle">{k}</text>')
    parts.append(f'<text class="axis" x="{_LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">k</text>')
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(k):.1f},{y(v):.1f}" for i, (k, v) in enumerate(known))
    parts.append(f'<path class="line" d="{path}"/>')
    for k, v in known:
        parts.append(f'<circle class="dot" cx="{x(k):.1f}" cy="{y(v):.1f}" r="3.5">'
                     f"<title>recall@{k} = {v:.3f}</title></circle>")
        # the end points' labels lean inwards, clear of the y-axis ticks and the right edge
        anchor, dx = ("start", 5) if k == k_lo else ("end", 0) if k == k_hi else ("middle", 0)
        parts.append(f'<text class="label" x="{x(k) + dx:.1f}" y="{y(v) - 8:.1f}" '
                     f'text-anchor="{anchor}">{v:.2f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(values: Sequence[float], *, title: str, unit: str = "ms") -> str:
    """A histogram of times on 1-2-5 bins, with the p50 and p95 marked; ms values are labelled in ms and s.

    Bins are equally wide on the page although their ranges grow (1, 2, 5, 10, …),
    which reads like a log scale: a few slow outliers do not squash the rest into one
    bar. With no values the plot is a "no data" note.
    """
    data = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not data:
        return _empty(title)
    # Times read as people say them (`112 ms`, `11.2 s`); another unit keeps plain numbers.
    timed = unit == "ms"
    tick = format_tick if timed else _format_edge
    shown = format_duration if timed else _format_edge
    suffix, axis = ("", "time") if timed else (f" {unit}", unit)
    edges = _edges(min(data), max(data))
    counts = [0] * (len(edges) - 1)
    for value in data:
        counts[_bin_of(value, edges)] += 1
    top_y = _TOP + _LABEL_BAND  # the tallest bar's top
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - top_y - _BOTTOM
    bar_w = plot_w / len(counts)
    top = max(counts)

    parts = [_open(title)]
    parts.append(f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{top_y + plot_h}" y2="{top_y + plot_h}"/>')
    parts.append(f'<text class="tick" x="{_LEFT - 6}" y="{top_y + plot_h + 4}" text-anchor="end">0</text>')
    parts.append(f'<text class="tick" x="{_LEFT - 6}" y="{top_y + 4}" text-anchor="end">{top}</text>')
    for i, count in enumerate(counts):
        h = count / top * plot_h
        x0 = _LEFT + i * bar_w
        label = f"{tick(edges[i])}–{tick(edges[i + 1])}{suffix}: {count}"
        parts.append(
            f'<rect class="bar" x="{x0 + 1:.1f}" y="{top_y + plot_h - h:.1f}" width="{max(bar_w - 2, 1):.1f}" '
            f'height="{h:.1f}"><title>{html.escape(label)}</title></rect>'
        )
    step = max(1, math.ceil(len(edges) / 9))  # at most ~9 edge labels, so they never overlap
    for i in range(0, len(edges), step):
        # The last edge sits on the plot's right end: its label reads leftwards, so `10 ms` is not cut off.
        anchor = "end" if i == len(edges) - 1 else "middle"
        parts.append(
            f'<text class="tick" x="{_LEFT + i * bar_w:.1f}" y="{HEIGHT - _BOTTOM + 16}" '
            f'text-anchor="{anchor}">{html.escape(tick(edges[i]))}</text>'
        )
    parts.append(f'<text class="axis" x="{_LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" '
                 f'text-anchor="middle">{html.escape(axis)} (1-2-5 bins), n = {len(data)}</text>')
    for rank, (name, p) in enumerate((("p50", 50), ("p95", 95))):
        value = percentile(data, p)
        if value is None:
            continue
        position = _LEFT + _position(value, edges) * bar_w
        label_y = _TOP + rank * 12  # in the band above the bars, p50 above p95
        parts.append(f'<line class="marker" x1="{position:.1f}" x2="{position:.1f}" y1="{label_y + 2}" '
                     f'y2="{top_y + plot_h}"/>')
        # A label on the right half reads leftwards from its line, so it stays inside the plot.
        anchor, x = ("end", position - 3) if position > _LEFT + plot_w / 2 else ("start", position + 3)
        parts.append(f'<text class="label" x="{x:.1f}" y="{label_y}" text-anchor="{anchor}">'
                     f'{name} {html.escape(shown(value))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _open(title: str) -> str:
    safe = html.escape(title)
    return (f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'role="img" aria-label="{safe}"><title>{safe}</title>')


def _empty(title: str) -> str:
    return (_open(title) + f'<text class="nodata" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
            "no data</text></svg>")


def _edges(lo: float, hi: float) -> list[float]:
    """The ladder's edges from the last one at or below ``lo`` to the first one above ``hi``."""
    start = max(i for i, edge in enumerate(_LADDER) if edge <= max(lo, 0.0))
    above = [i for i, edge in enumerate(_LADDER) if edge > hi]
    end = above[0] if above else len(_LADDER) - 1
    end = min(max(end, start + _MIN_BINS), len(_LADDER) - 1)
    return list(_LADDER[start : end + 1])


def _bin_of(value: float, edges: list[float]) -> int:
    for i in range(len(edges) - 1):
        if value < edges[i + 1]:
            return i
    return len(edges) - 2  # beyond the ladder's top: the last bin takes it


def _position(value: float, edges: list[float]) -> float:
    """Where ``value`` falls on the bin axis, in bins from the left, interpolated inside its bin."""
    i = _bin_of(value, edges)
    lo, hi = edges[i], edges[i + 1]
    return i + min(max((value - lo) / (hi - lo), 0.0), 1.0)


def _format_edge(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k" if value < 1_000_000 else f"{value / 1_000_000:g}M"
    if value >= 10:
        return f"{value:.0f}"
    return f"{value:.2g}"
