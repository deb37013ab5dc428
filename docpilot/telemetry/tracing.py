"""An eval's trace while the run goes on: handed, shard by shard, to the process that sends it.

``prepare_trace`` starts it as the run begins (when tracing is configured), the shards
hand their scored rows to ``RunTrace.add``, and ``trace_run`` sends the run's root at
its end and prints the one warning, if any. The spans are laid out by
``docpilot.telemetry.runs`` and sent by ``docpilot.telemetry.outbox``'s process.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Mapping
from typing import Any

from docpilot.config.model import TelemetryConfig
from docpilot.schema import Report, Row
from docpilot.telemetry.runs import model_of, record_span_id, root_spans
from docpilot.telemetry.settings import Tracing, tracing_settings, unusable
from docpilot.telemetry.spans import traceparent


class RunTrace:
    """One run's trace, sent in parts: each shard's records once they are scored, the run's root at the end.

    A run waits on its model most of the time, and its client wants the interpreter when
    it does not. So the rows go, as they are, to a process of their own
    (``docpilot.telemetry.outbox``), which lays out, makes, encodes and sends six spans a
    record on another core while later shards still wait on the model. The root's id is
    drawn now, so the records sent before it can name their parent.
    """

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing
        self.trace_id = random.getrandbits(128) or 1  # an all-zero id is invalid
        self.root_id = random.getrandbits(64) or 1
        self._sent: set[str] = set()
        self._lock = threading.Lock()
        self._outbox: Any = None

    def _open(self) -> Any:
        with self._lock:
            if self._outbox is None:
                from docpilot.telemetry.outbox import Outbox

                self._outbox = Outbox(self.tracing, self.trace_id, self.root_id)
            return self._outbox

    def traceparent(self, record_id: str) -> str:
        """The ``traceparent`` header that makes a server's turn for this record a child of the record's span."""
        return traceparent(self.trace_id, record_span_id(self.trace_id, record_id))

    def add(self, rows: list[Row], *, gate_only: bool, model: Mapping) -> None:
        """Hand these scored rows over to be sent; the call returns at once."""
        rows = [row for row in rows if row.timeline]
        if not rows:
            return
        with self._lock:
            self._sent.update(row.id for row in rows)
        self._open().put(("records", rows, gate_only, dict(model)))

    def finish(self, report: Report, *, started: float, report_started: float, ended: float) -> str | None:
        """Send the root, the report and the records not sent yet; wait for all. None, or the warning to print."""
        with self._lock:
            left = [row for row in report.rows if row.timeline and row.id not in self._sent]
        root = root_spans(report, started=started, report_started=report_started, ended=ended)
        count, failure = self._open().close(("finish", root, left, report.gate_only, dict(model_of(report))))
        if failure is None:
            return None
        spans = f"{count} spans" if count else "spans"
        return (f"warning: the run's {spans} were not sent to {self.tracing.url}: {failure}; "
                "the run itself is not affected")


def prepare_trace(settings: TelemetryConfig) -> RunTrace | None:
    """When tracing is configured, the run's trace, its sending process started now, while the run begins.

    The child's imports (a few hundred milliseconds of modules) then happen on another
    core while the run loads its docs. Not configured, or not usable (the extra
    missing): None, and ``trace_run`` says why.
    """
    tracing = tracing_settings(settings)
    if tracing is None or unusable(tracing) is not None:
        return None
    trace = RunTrace(tracing)
    trace._open()
    return trace


def trace_run(settings: TelemetryConfig, report: Report, *, started: float, report_started: float,
              ended: float, trace: RunTrace | None = None) -> None:
    """Finish the run's trace (``trace``, or one sent whole now) when tracing is configured; else do nothing.

    Whatever happens to the spans, the run goes on as it was: a collector that cannot
    take them, or a missing ``telemetry`` extra, costs one warning line on stderr.
    """
    tracing = tracing_settings(settings)
    if tracing is None:
        return
    problem = unusable(tracing)
    if problem is None:
        trace = trace or RunTrace(tracing)
        problem = trace.finish(report, started=started, report_started=report_started, ended=ended)
    if problem is not None:
        print(problem, file=sys.stderr)
