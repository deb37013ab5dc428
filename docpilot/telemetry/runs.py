"""An eval's report laid out as one trace: the run, a span per record, and under each record a span per stage.

Nothing is timed for the trace: the spans are laid out after the report is made, from
the times the run recorded anyway. Each row carries, in memory, when each of its stages
ran (``Row.timeline``: retrieve, prime, model, render, score); the stages the row times
itself (``stages_ms``) give the same durations, since both come from one measurement.
The model's first token is an event on the model span, at the row's ``first_token_ms``
counted from the model's start. A stage reused from the cache spans its look-up and
says so (``docpilot.cache_hit``), with the stored time beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from docpilot.metrics.summary import per_record
from docpilot.schema import Report, Row
from docpilot.telemetry.spans import AttributeValue, PlannedSpan, SpanEvent, derived_id, ns

STAGES = ("retrieve", "prime", "model", "render", "score")
"""The stages a record's span holds, in the order they run."""

# OpenInference's span kinds, which Phoenix and Langfuse read to draw a trace.
_KINDS = {"retrieve": "RETRIEVER", "prime": "CHAIN", "model": "LLM", "render": "CHAIN", "score": "EVALUATOR"}


def lay_out_records(rows: list[Row], *, gate_only: bool, model: Mapping, trace_id: int,
                    parent: int | None = None) -> list[PlannedSpan]:
    """A span per row (under the span at ``parent``, None for the run's root sent apart), a span per stage under each.

    Each record's span has the id ``record_span_id`` gives, so that a server asked the
    record's question (``--runtime server``) could name it as its turn's parent first.
    """
    spans: list[PlannedSpan] = []
    _add_records(spans, rows, _metric_values(rows, gate_only=gate_only), model, parent=parent, trace_id=trace_id)
    return spans


def record_span_id(trace_id: int, record_id: str) -> int:
    """The span id of a record's span in the run's trace, known before the span is made."""
    return derived_id(trace_id, "record", record_id)


def model_of(report: Report) -> Mapping:
    """The ``model`` section of the configuration the report carries; empty when it has none."""
    model = report.config.get("model", {}) if isinstance(report.config, Mapping) else {}
    return model if isinstance(model, Mapping) else {}


def root_spans(report: Report, *, started: float, report_started: float, ended: float) -> list[PlannedSpan]:
    """The run's root span, then the report's."""
    root = PlannedSpan("eval", ns(started), ns(ended), attributes=_run_attributes(report, model_of(report)))
    root.attributes["openinference.span.kind"] = "CHAIN"
    return [root, PlannedSpan("report", ns(report_started), ns(ended), parent=0,
                              attributes={"docpilot.verdict": report.verdict})]


def _add_records(spans: list[PlannedSpan], rows: list[Row], values: Mapping[str, Mapping[str, float]],
                 model: Mapping, *, parent: int | None, trace_id: int) -> None:
    """Append a span per row (under ``parent``) and, under each, a span per stage it timed."""
    for row in rows:
        timeline = row.timeline
        record = len(spans)
        spans.append(PlannedSpan(
            "record", ns(min(start for start, _ in timeline.values())), ns(max(end for _, end in timeline.values())),
            parent=parent, attributes=_record_attributes(row, values.get(row.id, {})), error=row.error,
            span_id=record_span_id(trace_id, row.id),
        ))
        for stage in STAGES:
            when = timeline.get(stage)
            if when is not None:
                spans.append(_stage_span(stage, when, row, record, model))


def _run_attributes(report: Report, model: Mapping) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "docpilot.run_id": report.run_id,
        "docpilot.set": report.set,
        "docpilot.split": report.split,
        "docpilot.verdict": report.verdict,
        "docpilot.gate_only": report.gate_only,
        "docpilot.runtime": report.runtime,
        "docpilot.orchestrator": report.orchestrator,
        "docpilot.records": len(report.rows),
        "docpilot.failed_gates": [gate.metric for gate in report.gates if not gate.passed],
    }
    if model.get("name"):
        attributes["gen_ai.request.model"] = str(model["name"])
    for metric, value in report.summary.items():
        if _number(value):
            attributes[f"docpilot.summary.{metric}"] = value
    return attributes


def _record_attributes(row: Row, values: Mapping[str, float]) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "docpilot.record.id": row.id,
        "docpilot.record.kind": row.kind,
        "docpilot.record.split": row.split,
        "docpilot.record.tags": list(row.tags),
        "docpilot.cache_hit": bool(row.cached),
        "docpilot.cached": list(row.cached),
        "docpilot.refused": row.refused,
        "openinference.span.kind": "CHAIN",
    }
    for name in ("latency_ms", "first_token_ms", "refused_by", "error_code"):
        value = getattr(row, name)
        if value is not None:
            attributes[f"docpilot.{name}"] = value
    for metric, value in values.items():
        attributes[f"docpilot.metric.{metric}"] = value
    return attributes


def _stage_span(stage: str, when: tuple[float, float], row: Row, parent: int, model: Mapping) -> PlannedSpan:
    cached = stage in row.cached
    attributes: dict[str, AttributeValue] = {"openinference.span.kind": _KINDS[stage]}
    span = PlannedSpan(stage, ns(when[0]), ns(when[1]), parent=parent, attributes=attributes)
    if cached:  # only then: a run has thousands of stage spans, and each attribute is encoded and sent
        attributes["docpilot.cache_hit"] = True
        if stage in row.stages_ms:
            attributes["docpilot.stored_ms"] = row.stages_ms[stage]  # what it took when it was computed
    if stage == "model":
        span.kind = "client"
        span.error = row.error
        attributes["gen_ai.operation.name"] = "chat"
        if model.get("name"):
            attributes["gen_ai.request.model"] = str(model["name"])
        for key, name in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
            if key in row.usage:
                attributes[f"gen_ai.usage.{name}"] = row.usage[key]
        if row.truncated:
            attributes["docpilot.truncated"] = True
        if not cached and row.first_token_ms is not None:
            # The row counts the first token from the record's start; the model started after retrieval.
            after_ms = max(row.first_token_ms - row.stages_ms.get("retrieve", 0.0), 0.0)
            at = min(span.start_ns + int(after_ms * 1e6), span.end_ns)
            span.events.append(SpanEvent("first token", at, {"docpilot.first_token_ms": row.first_token_ms}))
    return span


def _metric_values(rows: list[Row], *, gate_only: bool) -> dict[str, dict[str, float]]:
    """Each record's metric values (``metrics.summary.per_record``), by record id."""
    values: dict[str, dict[str, float]] = {}
    if not rows:
        return values
    for entry in per_record(rows, gate_only=gate_only):
        if _number(entry["value"]):
            values.setdefault(str(entry["id"]), {})[str(entry["metric"])] = entry["value"]
    return values


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
