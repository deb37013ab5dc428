"""A short Markdown summary of a run, for a CI job summary or a pull-request comment.

A verdict line that says what failed (the gates decide the verdict), a compact metric
table with each value's n (and its move when there is a previous comparable run), the
failed gates with the records that broke them, and the first records with a failing
outcome and their causes. Record ids, causes and details are
escaped, so a golden set or an answer cannot inject Markdown or HTML into the page
that shows the summary.
"""

from __future__ import annotations

import re

from docpilot.readout.outcomes import Readout
from docpilot.reports.scorecard import format_gate_value, format_value, shown_metrics
from docpilot.reports.stability import stability_line

MAX_RECORDS = 15
"""Failing records listed; the rest are counted."""

MAX_GATE_RECORDS = 20
"""Records listed per failed gate; the rest are counted."""

_BOUNDS = {"over_refusal_gate": "over_refusal_gate_upper95", "over_refusal_answer": "over_refusal_answer_upper95"}
# Characters that would start emphasis, a link, a code span, an HTML tag or an entity, or
# end a table cell; the rest of Markdown's syntax only acts at the start of a line.
_SPECIAL = re.compile(r"([\\`*_\[\]|<>~&])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def render_markdown(readout: Readout, *, max_records: int = MAX_RECORDS) -> str:
    """The summary of a readout, as Markdown text ending in a newline."""
    report = readout.report
    mode = ", gate-only" if report.gate_only else ""
    lines = [
        f"### {_headline(readout)} — {report.set} set, {report.split} split{_selection(report)}{mode}, "
        f"{len(report.rows)} records",
        "",
        f"Run `{_code(report.run_id)}` at {_escape(report.created_at)}, orchestrator {_escape(report.orchestrator)}, "
        f"runtime {_escape(report.runtime)}."
        + (f" {_escape(readout.comparison_note)}." if readout.comparison_note else ""),
        "",
        *_metric_table(readout),
        *_turn_table(readout),
        *_failed_gates(readout),
        *_flaky_records(readout, max_records),
        *_failing_records(readout, max_records),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _selection(report) -> str:
    return "" if report.selection.everything else f" ({_code(report.selection.describe())})"


def _headline(readout: Readout) -> str:
    """The verdict and what decided it: the failed gates, or how many gates held."""
    gates = readout.report.gates
    failed = [g for g in gates if not g.passed]
    if failed:
        shown = ", ".join(f"`{_code(g.metric)} {_code(g.op)} {g.threshold:g}`" for g in failed)
        return f"❌ DocPilot: FAIL on {shown}"
    held = f"{len(gates)} of {len(gates)} gates held" if gates else "no gate to check"
    return f"✅ DocPilot: PASS, {held}"


def _metric_table(readout: Readout) -> list[str]:
    """The metrics with their n; a rate's Wilson bound (≤) and a headline mean's 95 % interval by page ([a, b])
    beside the value."""
    report = readout.report
    with_moves = bool(readout.moves)
    header = "| metric | value | n |" + (" move |" if with_moves else "")
    rule = "|---|---:|---:|" + ("---|" if with_moves else "")
    lines, empty = [header, rule], []
    applicable, left_off = shown_metrics(report, report.summary)
    for metric, value in report.summary.items():
        if metric in _BOUNDS.values() or metric.startswith("stage_") or metric not in applicable:
            continue  # bounds sit beside their rate; per-stage times live in the HTML report
        if value is None:
            empty.append(metric)
            continue
        shown = format_value(metric, value)
        bound = report.summary.get(_BOUNDS.get(metric, ""))
        if bound is not None:
            shown += f" (≤ {format_value(metric, bound)})"
        shown += "" if metric not in report.intervals else " [{:.3f}, {:.3f}]".format(*report.intervals[metric])
        n = report.counts.get(metric)
        line = f"| `{_code(metric)}` | {_escape(shown)} | {'' if n is None else n} |"
        if with_moves:
            line += f" {_move(metric, readout)} |"
        lines.append(line)
    lines.append("")
    if empty:
        lines += ["No value (nothing to average over): " + ", ".join(f"`{_code(m)}`" for m in empty) + ".", ""]
    if left_off:
        lines += [_escape(left_off[0].upper() + left_off[1:]) + ".", ""]
    return lines


def _turn_table(readout: Readout) -> list[str]:
    """A run holding conversations: the headline metrics of its first turns, its follow-ups and each turn position,
    with the turns each is over; nothing for a run of single questions."""
    from docpilot.reports.scorecard import headline_metrics

    report = readout.report
    if not report.turns:
        return []
    metrics = headline_metrics(report)
    lines = ["**By turn** (conversations: each turn a record; single questions are in no row)", "",
             "| turn | records | " + " | ".join(f"`{_code(m)}`" for m in metrics) + " |",
             "|---|---:|" + "---:|" * len(metrics)]
    for name, piece in report.turns.items():
        values = " | ".join(_escape(format_value(m, piece.summary.get(m))) for m in metrics)
        lines.append(f"| {_escape(name)} | {piece.records} | {values} |")
    return [*lines, ""]


def _move(metric: str, readout: Readout) -> str:
    move = readout.moves.get(metric)
    if move is None or move.delta is None:
        return ""
    return _escape(move.text(format_value(metric, abs(move.delta))))


def _failed_gates(readout: Readout) -> list[str]:
    failed = [g for g in readout.report.gates if not g.passed]
    if not failed:
        return []
    lines = ["**Failed gates**", ""]
    for gate in failed:
        line = (f"- `{_code(gate.metric)} {_code(gate.op)} {gate.threshold:g}`: "
                f"value {_escape(format_gate_value(gate))}")
        if gate.records:
            shown = ", ".join(f"`{_code(r)}`" for r in gate.records[:MAX_GATE_RECORDS])
            extra = len(gate.records) - MAX_GATE_RECORDS
            line += f" — records: {shown}" + (f" and {extra} more" if extra > 0 else "")
        lines.append(line)
    return [*lines, ""]


def _failing_records(readout: Readout, max_records: int) -> list[str]:
    failing = readout.failing
    if not failing:
        return ["No record failed."]
    lines = [f"**Records with a failing outcome** ({len(failing)}): each counts in its metrics; "
             "only the gates above decide the verdict.", "",
             "| record | kind | split | cause |", "|---|---|---|---|"]
    for record in failing[:max_records]:
        reasons = ([record.cause] if record.cause else []) + [f"gate {g}" for g in record.gates]
        cause = _escape(", ".join(reasons))
        if record.detail:
            cause += " — " + _escape(_clip(record.detail, 140))
        lines.append(f"| `{_code(record.row.id)}` | {record.row.kind} | {record.row.split} | {cause} |")
    more = len(failing) - max_records
    if more > 0:
        lines += ["", f"… and {more} more failing records (see the HTML report or `docpilot improve`)."]
    return lines


def _flaky_records(readout: Readout, max_records: int) -> list[str]:
    """A run of several samples per record: its flip rate and pass^k, and the records whose outcome differed."""
    line = stability_line(readout.report)
    if line is None:
        return []
    found = readout.report.stability.flaky
    lines = [f"**Stability**: {_escape(line)}.", ""]
    if found:
        lines += ["| flaky record | samples passed | answer F1 (mean ± spread) |", "|---|---|---|"]
        for record in found[:max_records]:
            f1 = "" if record.answer_f1_mean is None else f"{record.answer_f1_mean:.3f}"
            if record.answer_f1_spread is not None:
                f1 += f" ± {record.answer_f1_spread:.3f}"
            passed = round(record.pass_rate * record.samples)
            lines.append(f"| `{_code(record.id)}` | {passed} of {record.samples} | {f1} |")
        if len(found) > max_records:
            lines.append(f"\n… and {len(found) - max_records} more flaky records (the report's `stability.flaky`).")
        lines.append("")
    return lines


def _escape(text: str) -> str:
    """Text safe to place in a Markdown table cell: one line, Markdown and HTML characters escaped."""
    return _SPECIAL.sub(r"\\\1", _one_line(text))


def _code(text: str) -> str:
    """Text safe inside a single-backtick code span: one line, no backticks, no table-breaking pipes."""
    return _one_line(text).replace("`", "'").replace("|", "¦")


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub("", str(text)).split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_markdown_variants(report) -> str:
    """The summary of a run of several variants: the verdict, a metrics × variants table, the paired verdict."""
    from docpilot.reports.compare import describe_p
    from docpilot.reports.matrix import COST_ROWS
    from docpilot.reports.scorecard import headline_metrics, with_interval

    variants = report.variants or []
    names = [v.name for v in variants]
    failed = [f"`{_code(v.name)}`" for v in variants if v.verdict == "fail"]
    mark = "✅ DocPilot: PASS" if report.verdict == "pass" else "❌ DocPilot: FAIL"
    why = f", failed gates in {', '.join(failed)}" if failed else ""
    lines = [f"### {mark}{why} — {len(names)} variants, {report.set} set, {report.split} split, "
             f"{len({row.id for row in report.rows})} records", "",
             f"Run `{_code(report.run_id)}`; baseline `{_code(names[0])}`.", "",
             "| metric | " + " | ".join(_escape(n) for n in names) + " |", "|---" * (len(names) + 1) + "|"]
    metrics = dict.fromkeys(m for m in (*headline_metrics(report), "errors", *COST_ROWS) if m in report.summary)
    for metric in metrics:
        lines.append(f"| {_escape(metric)} | " + " | ".join(_escape(with_interval(metric, v.summary.get(metric),
                                                                                   v.intervals))
                                                            for v in variants) + " |")
    lines.append("| verdict | " + " | ".join(v.verdict for v in variants) + " |")
    paired = report.paired
    if paired is not None:
        lines += ["", f"Paired against `{_code(paired.baseline)}` (Holm-corrected over {sum(t.p_holm is not None for t in paired.tests)} tests, α = {paired.alpha:g}):"]
        found = [t for t in paired.tests if t.direction != "none"]
        for test in found:
            lines.append(f"- `{_code(test.variant)}` {test.direction} on {_escape(test.outcome)}: "
                         f"{test.effect:+.3f}, p {describe_p(test.p_holm)}")
        if not found:
            lines.append("- no variant differs significantly from the baseline on any outcome")
        lines += [f"- no evidence for `{_code(t.variant)}` on {_escape(t.outcome)}: the test could see "
                  f"±{t.detectable:.3f} over {t.n} records" for t in paired.tests if t.detectable is not None]
        if paired.cheapest_not_worse:
            lines.append(f"- cheapest of those no worse ({', '.join(_escape(n) for n in paired.not_worse)}) by "
                         f"{_escape(paired.cheapest_by)}: `{_code(paired.cheapest_not_worse)}`")
    repeated = [v for v in variants if v.stability is not None]
    if repeated:
        lines += ["", "Stability (each question asked several times):"]
    lines += [f"- `{_code(v.name)}`: {_escape(stability_line(v))}"
              + (f"; flaky: {', '.join(f'`{_code(r.id)}`' for r in v.stability.flaky)}" if v.stability.flaky else "")
              for v in repeated]
    for variant in variants:
        for gate in variant.gates:
            if not gate.passed:
                lines.append(f"- ❌ `{_code(variant.name)}`: `{_code(gate.metric)} {_code(gate.op)} "
                             f"{gate.threshold:g}` (value {format_gate_value(gate)})")
    return "\n".join(lines).rstrip() + "\n"
