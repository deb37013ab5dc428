"""The scorecard printed at the end of a run: each number with its n, a table per tag, the gates, the verdict.

Metrics the run's record set cannot produce (attack metrics in a golden run, question
metrics in an attack run) are left off, with one line naming them, so a short run is
not a page of ``n/a``. A metric a gate reads is always shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docpilot.golden.gold_state import stale_gold_line
from docpilot.golden.starter import PLACEHOLDER_SITE
from docpilot.metrics import registry
from docpilot.metrics.aggregate import total
from docpilot.metrics.gates import telling_decimals
from docpilot.reports.faults import group_faults
from docpilot.reports.stability import render_stability
from docpilot.reports.terminal import clean
from docpilot.schema import GateResult, Report

_COUNTS = {m.id for m in registry.METRICS.values() if m.aggregate is total and m.family != "usage"} | {
    "truncated_answers"}
"""Metrics that count records or markers (their run value a sum), shown as whole numbers; tokens and dollars
are sums too, shown with their own units."""
# Shown on one line under the table: the run's spending beside what the cache saved.
_USAGE = {"prompt_tokens", "completion_tokens", "cost_usd",
          "prompt_tokens_cached", "completion_tokens_cached", "cost_usd_cached"}
_BOUNDS = {"over_refusal_gate": "over_refusal_gate_upper95", "over_refusal_answer": "over_refusal_answer_upper95"}
_QUESTION_FAMILIES = ("retrieval", "answer", "citations", "refusals")
_TIMES = ("latency_", "first_token_", "stage_")

HEADLINE = {
    "golden": ("recall@8", "ndcg@8", "answer_f1", "citation_precision", "negatives_caught", "over_refusal_answer",
               "latency_p50"),
    "adversarial": ("attack_success_rate", "refusal_accuracy", "safe_answer_rate", "latency_p50"),
}
"""Record set → the metrics the HTML report's per-tag table shows, where the run has them."""

TERMINAL_HEADLINE = {
    "golden": ("recall@8", "answer_f1", "negatives_caught"),
    "adversarial": ("attack_success_rate", "refusal_accuracy"),
}
"""The fewer metrics of the terminal's per-tag table, so it fits 80 columns."""


def format_value(metric: str, value: float | int | None, *, decimals: int | None = None) -> str:
    """A metric value as the scorecard shows it: n/a for null, ms for times, counts as integers.

    ``decimals`` overrides the metric's usual number of decimals (counts stay integers).
    """
    if value is None:
        return "n/a"
    if metric in _COUNTS:
        return str(int(value))
    if metric.startswith(("prompt_tokens", "completion_tokens")):
        return f"{int(value):,}"
    places = _decimals(metric, value) if decimals is None else decimals
    if metric.startswith("cost_usd"):
        return f"USD {value:.{places}f}"
    if metric.startswith(_TIMES):
        return f"{value:,.{places}f} ms"
    return f"{value:.{places}f}"


def interval_note(report: Report, metric: str) -> str:
    """A headline metric's page-clustered 95 % interval, as the scorecard's note shows it; empty without one."""
    interval = report.intervals.get(metric)
    return "" if interval is None else f"95 % [{interval[0]:.3f}, {interval[1]:.3f}] by page"


def with_interval(metric: str, value: float | None, intervals: Mapping[str, tuple[float, float]]) -> str:
    """A value as the scorecard shows it, followed by its page-clustered 95 % interval where there is one
    (the variants' matrix, a cell per variant)."""
    interval = intervals.get(metric)
    shown = format_value(metric, value)
    return shown if interval is None or value is None else f"{shown} [{interval[0]:.3f}, {interval[1]:.3f}]"


def format_gate_value(gate: GateResult) -> str:
    """A gate's value as printed beside its condition: with the digits that show why it passed or failed.

    A value of 0.7996 against ``>= 0.8`` prints as 0.7996, not as the scorecard's
    0.800, which would read as a pass.
    """
    value = gate.value
    if value is None or gate.metric in _COUNTS or gate.metric.startswith(("prompt_tokens", "completion_tokens")):
        return format_value(gate.metric, value)
    places = telling_decimals(gate.op, value, gate.threshold, _decimals(gate.metric, value))
    return format_value(gate.metric, value, decimals=places)


def _decimals(metric: str, value: float) -> int:
    """How many decimals the scorecard shows a metric with: 4 for dollars, none for times of 10 ms or more, else 3."""
    if metric.startswith("cost_usd"):
        return 4
    if metric.startswith(_TIMES):
        return 0 if value >= 10 else 2
    return 3


def applies(metric: str, record_set: str) -> bool:
    """Whether a record set can produce the metric: attack metrics need probes, question metrics questions."""
    if not registry.is_metric_id(metric):
        return True  # a metric this version does not know: show it rather than hide it
    family = registry.get(metric).family
    if family == "attacks":
        return record_set == "adversarial"
    if family in _QUESTION_FAMILIES:
        return record_set == "golden" or metric == "errors"
    return True  # times, measured in every run


def shown_metrics(report: Report, metrics: Iterable[str]) -> tuple[set[str], str]:
    """The metrics to show for ``report``, and one line naming those left off (empty when none are)."""
    gated = {gate.metric for gate in report.gates}
    metrics = list(metrics)
    shown = {m for m in metrics if applies(m, report.set) or m in gated}
    hidden = [m for m in metrics if m not in shown and m not in _BOUNDS.values()]
    lines = [_unranked_line(report)] if any(r.unranked for r in report.rows) else []
    lines += _level_lines(report)
    if hidden:
        why = ("a golden run has no attack probes" if report.set == "golden"
               else "an attack run has no golden questions")
        lines.insert(0, f"left off, as {why} to measure them on: {', '.join(hidden)}")
    return shown, "; ".join(lines)


def _unranked_line(report: Report) -> str:
    """Why retrieval metrics are absent: the assistant measured showed no sources (a target without reply.sources)."""
    unranked = sum(r.unranked for r in report.rows if r.kind == "positive")
    positives = sum(r.kind == "positive" for r in report.rows)
    return (f"retrieval metrics are absent, not 0, for {unranked} of {positives} positives: the assistant "
            "showed no sources (a target without reply.sources, docs/targets.md)")


def _level_lines(report: Report) -> list[str]:
    """What the retrieval metrics read when an assistant named pages, and which sources the docs lack."""
    from docpilot.metrics.retrieval import names_pages

    lines = []
    ranked = [r for r in report.rows if r.kind == "positive" and not r.unranked]
    paged = sum(names_pages(r.retrieved) for r in ranked)
    if paged:
        lines.append(f"retrieval metrics read at page level for {paged} of {len(ranked)} positives: their ranking "
                     "names pages, not sections, so a gold section counts as found when its page is "
                     "(docs/targets.md#granularity)")
    outside = [r.id for r in report.rows if r.outside_docs]
    if outside:
        count = sum(len(r.outside_docs) for r in report.rows)
        more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
        lines.append(f"{count} returned sources name nothing in the docs (sources_outside_docs), in "
                     f"{', '.join(outside[:5])}{more}: each ranked where it came, matching no gold")
    return lines


def headline_metrics(report: Report, *, terminal: bool = False) -> list[str]:
    """The metrics of the per-tag table: the set's headline ones that the run reports.

    A gate-only run has retrieval only, so its table shows recall@8, MRR and nDCG@8.
    """
    if report.gate_only:
        return [m for m in ("recall@8", "mrr", "ndcg@8") if m in report.summary]
    chosen = (TERMINAL_HEADLINE if terminal else HEADLINE).get(report.set, ())
    return [m for m in chosen if m in report.summary]


def render_scorecard(report: Report, console: Console, *, path: str | None = None,
                     command_ms: float | None = None, failing: Sequence[str] | None = None) -> None:
    """Print the report's summary, the per-tag table, the gates and the verdict.

    ``command_ms`` is the whole command's wall time so far, for the verdict line; without
    it, the time the report recorded when it was assembled. ``failing`` lists the failing
    records, counted beside the verdict.
    """
    shown, left_off = shown_metrics(report, report.summary)
    table = Table(title=f"DocPilot scorecard — {report.split} split, {len(report.rows)} records"
                        + ("" if report.selection.everything else f" ({report.selection.describe()})")
                        + conversations_note(report),
                  title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("n", justify="right")
    table.add_column("note")
    for metric, value in report.summary.items():
        if metric in _BOUNDS.values() or metric not in shown or metric in _USAGE:
            continue
        note = ""
        if metric in _BOUNDS and report.summary.get(_BOUNDS[metric]) is not None:
            note = f"≤ {report.summary[_BOUNDS[metric]]:.3f} at 95 %"
        n = report.counts.get(metric)
        replayed = report.replayed.get(metric)
        if replayed:
            note = f"{replayed} of {n} from the cache"
        note = "; ".join(x for x in (interval_note(report, metric), note) if x)
        table.add_row(metric, format_value(metric, value), "" if n is None else str(n), note)
    console.print(table)
    for line in (retrieval_line(report), stale_gold_line(report.rows), usage_line(report.summary),
                 cache_line(report)):
        if line:
            console.print(line, highlight=False, markup=False)
    if left_off:
        console.print(left_off, highlight=False, markup=False, soft_wrap=True)
    render_stability(report, console)
    _render_slices(report, console)
    for gate in report.gates:
        mark = "[green]pass[/]" if gate.passed else "[red]FAIL[/]"
        value = format_gate_value(gate)
        line = f"  {mark}  {gate.metric} {gate.op} {gate.threshold:g}  (value {value})"
        if gate.records and not gate.passed:
            shown_ids = ", ".join(gate.records[:10]) + (" …" if len(gate.records) > 10 else "")
            line += f"  records: {escape(clean(shown_ids))}"  # ids come from the golden file: no markup, no escapes
        console.print(line, highlight=False)
    if report.leaks:
        probes = len({leak.record for leak in report.leaks})
        console.print(f"leaks ({probes} probes):", highlight=False)
        for leak in report.leaks:
            # markup=False: leaked text may hold [brackets] that rich would read as markup.
            console.print(clean(f"  {leak.record}: {leak.text[:120]!r} in the {leak.where} "
                                f"(forbidden {leak.forbidden!r})"),
                          markup=False, highlight=False)
    _render_verdict(report, console, path=path, command_ms=command_ms, failing=failing)


def conversations_note(report: Report) -> str:
    """``, 7 of them turns of 3 conversations`` for a run holding conversations; empty for single questions."""
    turns = [row for row in report.rows if row.conversation is not None]
    if not turns:
        return ""
    conversations = len({row.conversation for row in turns})
    return f", {len(turns)} of them turns of {conversations} conversation{'s' if conversations > 1 else ''}"


def _render_verdict(report: Report, console: Console, *, path: str | None, command_ms: float | None,
                    failing: Sequence[str] | None) -> None:
    """The verdict, with the records failing an outcome beside it, then where the run went and its report."""
    colour = "green" if report.verdict == "pass" else "red"
    mode = "gate-only, " if report.gate_only else ""
    command = command_ms if command_ms is not None else report.command_ms
    took = f"stages {report.wall_ms or 0:,.0f} ms"
    if command is not None:
        took = f"command {command:,.0f} ms, " + took
    failed = failing_line(report, failing)
    console.print(
        f"verdict: [bold {colour}]{report.verdict}[/]" + (f", {failed}" if failed else "")
        + f"  ({mode}orchestrator {report.orchestrator}, {took})",
        highlight=False,
    )
    placeholder = placeholder_warning(report)
    if placeholder:
        console.print(f"[yellow]warning[/]: {escape(placeholder)}", highlight=False, soft_wrap=True)
    if report.orchestrator_reason:
        console.print(f"orchestrator: {report.orchestrator}, because {report.orchestrator_reason}; "
                      f"{report.orchestrator_other}", highlight=False, soft_wrap=True, markup=False)
    if path:
        console.print(f"report: {path}", highlight=False, soft_wrap=True, markup=False)


def failing_line(report: Report, failing: Sequence[str] | None) -> str | None:
    """``17 of 20 records failed an outcome (docpilot improve lists them)``; None when none did or none were given.

    Printed beside the verdict: gates read averages, so a run can pass them while most of
    its records fail something. ``failing`` is the caller's list of the failing records
    (``readout.outcomes.failing_ids``, the rule ``improve`` lists them by).
    """
    if not failing:
        return None
    return f"{len(failing)} of {len(report.rows)} records failed an outcome (`docpilot improve` lists them)"


def placeholder_warning(report: Report) -> str | None:
    """A warning when the answers' links point at the placeholder site ``docpilot init`` writes."""
    base = str(((report.config or {}).get("corpus") or {}).get("base_url") or "")
    if not base.startswith(PLACEHOLDER_SITE.rstrip("/")):
        return None
    return (f"every link points at {base}, the placeholder `docpilot init` wrote: set corpus.base_url in the "
            "config (or DOCPILOT_CORPUS__BASE_URL) to where the docs are published")


BANDS_TITLE = "by overlap band (the question's words in its gold section, docs/golden-set.md)"
TURNS_TITLE = "by turn (conversations: first turns, follow-ups, each position)"


def _render_slices(report: Report, console: Console) -> None:
    """One row per tag with the headline metrics (the numbers a run with --tag TAG would give), then one
    per overlap band, then, for a run holding conversations, one per turn slice."""
    metrics = headline_metrics(report, terminal=True)
    for title, label, pieces in (("by tag (the numbers a run with --tag TAG gives)", "tag", report.slices),
                                 (BANDS_TITLE, "overlap", report.bands),
                                 (TURNS_TITLE, "turn", report.turns)):
        if not pieces:
            continue
        table = Table(title=title, title_justify="left")
        table.add_column(label, no_wrap=True)
        table.add_column("records", justify="right")
        for metric in metrics:
            table.add_column(metric, justify="right")
        for name, piece in pieces.items():
            table.add_row(escape(name), str(piece.records), *(format_value(m, piece.summary.get(m)) for m in metrics))
        console.print(table)


def retrieval_line(report: Report) -> str | None:
    """Which retriever ranked the sections, with its embedder and fusion; None when the report has no config."""
    settings = report.config.get("retrieval") if isinstance(report.config, dict) else None
    if not isinstance(settings, dict) or "retriever" not in settings:
        return None
    target = report.config.get("target")
    if target:  # an assistant DocPilot did not build: its own ranking, read from the sources it returned
        return f"retrieval: the target {target}'s own, from the sources it returned"
    retriever = settings["retriever"]
    if retriever == "bm25":
        return "retrieval: bm25"
    embedder = settings.get("embedder")
    if retriever == "dense":
        return f"retrieval: dense, {embedder} embedder"
    return f"retrieval: hybrid, bm25 + {embedder} embedder, {settings.get('fusion')} fused"


def usage_line(summary: dict) -> str | None:
    """Tokens and cost of the run, what this run spent and what came from the cache; None when
    the service reported no usage."""
    prompt, completion = summary.get("prompt_tokens"), summary.get("completion_tokens")
    if prompt is None and completion is None:
        return None
    prompt_cached = summary.get("prompt_tokens_cached") or 0
    completion_cached = summary.get("completion_tokens_cached") or 0
    prompt, completion = prompt or 0, completion or 0
    line = (
        f"tokens: {prompt:,} prompt + {completion:,} completion "
        f"(this run {prompt - prompt_cached:,} + {completion - completion_cached:,}, "
        f"from the cache {prompt_cached:,} + {completion_cached:,})"
    )
    cost = summary.get("cost_usd")
    if cost is not None:
        cached = summary.get("cost_usd_cached") or 0.0
        line += f"; cost USD {cost:.4f} (this run {cost - cached:.4f}, from the cache {cached:.4f})"
    return line


def cache_line(report: Report) -> str | None:
    """Per cached stage, how many records reused a stored result and how many computed one; None when
    nothing was cached on this side (a server runtime, or a report from before the counts).

    After an edit to a page or a record this is where a user sees that only the affected
    records ran again.
    """
    if not report.cache_stats:
        return None
    parts = [f"{stage} reused {counts.get('reused', 0)} / computed {counts.get('computed', 0)}"
             for stage, counts in report.cache_stats.items()]
    return "cache: " + ", ".join(parts)


def render_faults(report: Report, console: Console) -> None:
    """Print the run's errored records grouped by cause: count, cause, and the first message of each."""
    groups = group_faults(report.rows)
    if not groups:
        return
    total = sum(group.count for group in groups)
    console.print(f"[red]errors[/]: {total} of {len(report.rows)} records, by cause", highlight=False)
    for group in groups:
        # markup=False: a service's message may hold [brackets]; clean: and control characters.
        console.print(clean(f"  {group.count} × {group.cause}"), markup=False, highlight=False)
        console.print(clean(f"      first ({group.first_record}): {group.first_message}"), markup=False,
                      highlight=False, soft_wrap=True)
