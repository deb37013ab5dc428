"""The run as JUnit XML, so a CI system lists each record as a test and each failure beside it.

One ``<testsuite>`` inside ``<testsuites>`` (one per variant in a run of several): a ``<testcase>`` per record (classname
``docpilot.<set>.<split>``, name the record id, time its latency), then a
``gate:<metric>`` testcase per gate. The file agrees with the verdict: a testcase
fails exactly when what it stands for fails the run. A gate's testcase fails when the
gate failed; a record's fails when it is one of the records a failed gate names (as
``<error>`` when its turn errored). A record whose own outcome is wrong but which no
failed gate names (a missed gold section, under a recall gate that held) passes, with
its cause in ``<system-out>``, so a CI test tab shows it without turning red while
the job is green. A negative in a run without a model is ``<skipped>``: only its
answer could fail it.

ElementTree escapes text and attributes; characters XML 1.0 cannot hold at all
(control characters a model may emit) are replaced first, so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from docpilot.readout.outcomes import Readout, RecordOutcome
from docpilot.reports.scorecard import format_gate_value
from docpilot.schema import GateResult

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MESSAGE_CHARS = 300  # CI viewers show the message on one line: keep it short

def render_junit(readout: Readout) -> str:
    """The JUnit XML document for a readout, as a string with an XML declaration."""
    return _document([_suite(readout)])


def render_junit_variants(readouts: list[tuple[str, Readout]]) -> str:
    """The JUnit XML of a run of several variants: one test suite per variant (``docpilot.<set>.<split>.<variant>``)."""
    return _document([_suite(readout, variant=name) for name, readout in readouts])


def _document(suites: list[ET.Element]) -> str:
    totals = {key: str(sum(int(s.get(key, "0")) for s in suites)) for key in ("tests", "failures", "errors", "skipped")}
    seconds = max((float(s.get("time", "0")) for s in suites), default=0.0)  # the suites ran at once
    root = ET.Element("testsuites", {"name": "docpilot", **totals, "time": f"{seconds:.3f}"})
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(readout: Readout, *, variant: str | None = None) -> ET.Element:
    report = readout.report
    suite_name = f"docpilot.{report.set}.{report.split}" + (f".{variant}" if variant else "")
    cases = [_record_case(record, readout, variant) for record in readout.records]
    cases += [_gate_case(gate, suite_name) for gate in report.gates]
    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    seconds = (report.wall_ms or 0.0) / 1000
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": str(errors),
              "skipped": str(skipped), "time": f"{seconds:.3f}"}
    suite = ET.Element("testsuite", {"name": _clean(suite_name), **counts, "timestamp": report.created_at})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("run_id", report.run_id), ("verdict", report.verdict), ("set", report.set),
                        ("split", report.split), ("gate_only", str(report.gate_only).lower()),
                        ("runtime", report.runtime), ("orchestrator", report.orchestrator),
                        *((("variant", variant),) if variant else ())):
        ET.SubElement(properties, "property", {"name": name, "value": _clean(value)})
    suite.extend(cases)
    return suite


def _record_case(record: RecordOutcome, readout: Readout, variant: str | None = None) -> ET.Element:
    row = record.row
    seconds = (row.latency_ms or 0.0) / 1000
    classname = f"docpilot.{readout.report.set}.{row.split}" + (f".{variant}" if variant else "")
    case = ET.Element("testcase", {"classname": _clean(classname),
                                   "name": _clean(row.id), "time": f"{seconds:.3f}"})
    if record.gates and row.error is not None:
        _child(case, "error", _short(f"the turn errored: {row.error}"), "error", _body(record, _reasons(record)))
    elif record.gates:
        reasons = _reasons(record)
        _child(case, "failure", _short(reasons[0]), f"gate:{record.gates[0]}", _body(record, reasons))
    elif readout.report.gate_only and row.kind == "negative":
        ET.SubElement(case, "skipped", {"message": "no model ran (--gate-only): a negative is judged by its answer"})
    elif record.cause is not None:
        # Readable beside the test, and not a failure: no failed gate counts this record.
        out = ET.SubElement(case, "system-out")
        out.text = _clean("outcome (not counted against the verdict): " + _body(record, _reasons(record)))
    return case


def _gate_case(gate: GateResult, suite_name: str) -> ET.Element:
    case = ET.Element("testcase", {"classname": _clean(suite_name), "name": _clean(f"gate:{gate.metric}"),
                                   "time": "0.000"})
    if not gate.passed:
        value = format_gate_value(gate)
        message = f"{gate.metric} {gate.op} {gate.threshold:g} failed: value {value}"
        body = message
        if gate.records:
            body += "\nrecords: " + ", ".join(gate.records)
        _child(case, "failure", _short(message), "gate", body)
    return case


def _reasons(record: RecordOutcome) -> list[str]:
    reasons = [f"breaks the gate {metric}" for metric in record.gates]
    if record.cause is not None:
        reasons.append(f"{record.cause}: {record.detail}" if record.detail else record.cause)
    return reasons


def _body(record: RecordOutcome, reasons: list[str] | None = None) -> str:
    row = record.row
    lines = list(reasons or [])
    if record.also:
        lines.append("also: " + ", ".join(record.also))
    lines.append(f"question: {row.question}")
    if row.gold:
        lines.append("gold: " + ", ".join(row.gold))
    if row.retrieved:
        lines.append("retrieved: " + ", ".join(row.retrieved))
    if row.answer is not None:
        lines.append(f"answer: {row.answer}")
    if row.error is not None:
        lines.append(f"error: {row.error}")
    return "\n".join(lines)


def _child(case: ET.Element, tag: str, message: str, kind: str, text: str) -> None:
    element = ET.SubElement(case, tag, {"message": _clean(message), "type": _clean(kind)})
    element.text = _clean(text)


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_CHARS else line[: _MESSAGE_CHARS - 1] + "…"


def _clean(text: str) -> str:
    """The text with characters XML 1.0 forbids replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", str(text))
