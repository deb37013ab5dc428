"""An eval's trace as a real collector receives it, checked against the report the same run wrote.

A real OTLP/HTTP receiver on 127.0.0.1 (``tests.support.otlp_receiver``) decodes what
the SDK's exporter sends; the eval is the real command, run inline on the test corpus.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner
from docpilot.metrics.registry import get
from docpilot.metrics.summary import per_record

from docpilot.cli import main
from docpilot.reports.report import load_report
from tests.conftest import DATA, ROOT
from tests.support.otlp_receiver import ReceivedSpan, otlp_receiver

pytestmark = pytest.mark.slow

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", "inline"]
TOLERANCE_MS = 0.01  # the row rounds its times to the microsecond
STAGES = ["retrieve", "prime", "model", "render", "score"]


def _eval(tmp_path, name: str = "r.json"):
    out = tmp_path / name
    result = CliRunner().invoke(main, ["eval", *BASE, "--out", str(out)], catch_exceptions=False)
    return result, load_report(out)


def _by_id(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {span.span_id: span for span in spans}


def _within(child: ReceivedSpan, parent: ReceivedSpan) -> bool:
    return parent.start_ns <= child.start_ns <= child.end_ns <= parent.end_ns


def test_an_eval_sends_one_trace_with_a_span_per_record_and_stage(tmp_path, monkeypatch):
    with otlp_receiver() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        result, report = _eval(tmp_path)
        spans = list(collector.spans)  # sent before the command returned
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    answered = [row for row in report.rows if row.answer is not None]
    assert len(spans) == 1 + len(report.rows) + sum(5 if row.answer is not None else 3 for row in report.rows) + 1
    assert len({span.trace_id for span in spans}) == 1
    (root,) = [span for span in spans if span.parent_id == ""]
    assert root.name == "eval" and root.attributes["docpilot.run_id"] == report.run_id
    assert root.attributes["docpilot.verdict"] == report.verdict
    assert root.attributes["docpilot.summary.recall@8"] == report.summary["recall@8"]
    assert root.resource["service.name"] == "docpilot"
    spans_by_id = _by_id(spans)
    records = {span.attributes["docpilot.record.id"]: span for span in spans if span.name == "record"}
    assert set(records) == {row.id for row in report.rows}
    values = {(entry["id"], entry["metric"]): entry["value"] for entry in per_record(report.rows)}
    for row in report.rows:
        record = records[row.id]
        assert record.parent_id == root.span_id and _within(record, root)
        assert record.attributes["docpilot.record.tags"] == row.tags
        assert record.attributes["docpilot.cache_hit"] is False
        for (record_id, metric), _ in values.items():
            if record_id == row.id:  # each value as the metric's own per-record function gives it
                assert record.attributes[f"docpilot.metric.{metric}"] == pytest.approx(get(metric).score(row))
        stages = {span.name: span for span in spans if span.parent_id == record.span_id}
        expected = STAGES if row.answer is not None else ["retrieve", "prime", "score"]
        assert sorted(stages) == sorted(expected)
        for stage in stages.values():
            assert _within(stage, record), (row.id, stage.name)
            assert "docpilot.cache_hit" not in stage.attributes
        # Ordered as they ran: each stage starts once the one before it has ended.
        ordered = [stages[name] for name in expected]
        assert all(a.end_ns <= b.start_ns for a, b in zip(ordered, ordered[1:], strict=False))
        assert stages["retrieve"].duration_ms == pytest.approx(row.stages_ms["retrieve"], abs=TOLERANCE_MS)
        if row.answer is not None:
            model = stages["model"]
            assert model.duration_ms == pytest.approx(row.stages_ms["model"], abs=TOLERANCE_MS)
        if row.first_token_ms is not None:
            ((event, at, _),) = stages["model"].events
            model = stages["model"]
            assert event == "first token"
            offset_ms = (at - model.start_ns) / 1e6
            assert offset_ms == pytest.approx(row.first_token_ms - row.stages_ms["retrieve"], abs=TOLERANCE_MS)
    assert answered, "the test corpus answers some questions"
    (report_span,) = [span for span in spans if span.name == "report"]
    assert spans_by_id[report_span.parent_id] is root and _within(report_span, root)


def test_a_second_run_says_which_stages_came_from_the_cache(tmp_path, monkeypatch):
    _eval(tmp_path, "first.json")
    with otlp_receiver() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        result, report = _eval(tmp_path, "second.json")
        spans = list(collector.spans)
    assert result.exit_code == 0
    for row in report.rows:
        (record,) = [s for s in spans if s.name == "record" and s.attributes["docpilot.record.id"] == row.id]
        assert record.attributes["docpilot.cache_hit"] is True
        assert record.attributes["docpilot.cached"] == row.cached
        for stage in [s for s in spans if s.parent_id == record.span_id]:
            assert stage.attributes.get("docpilot.cache_hit", False) is (stage.name in row.cached)
            if stage.name in ("retrieve", "model"):
                # The look-up's own time, with the stored measure beside it.
                assert stage.attributes["docpilot.stored_ms"] == row.stages_ms[stage.name]
                assert not stage.events


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_collector_that_is_down_costs_one_warning_and_not_the_verdict(tmp_path, monkeypatch, capfd):
    _, untraced = _eval(tmp_path, "untraced.json")
    capfd.readouterr()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("DOCPILOT_TELEMETRY__TIMEOUT_S", "1")
    result, report = _eval(tmp_path, "traced.json")
    err = result.stderr + capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "spans were not sent" in line]
    assert len(warnings) == 1, err
    assert "Traceback" not in err and "Transient error" not in err
    assert result.exit_code == 0 and report.verdict == untraced.verdict == "pass"


def test_a_collector_that_refuses_costs_one_warning(tmp_path, monkeypatch, capfd):
    with otlp_receiver(status=400) as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        result, _ = _eval(tmp_path)
    err = result.stderr + capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "spans were not sent" in line]
    assert len(warnings) == 1 and "400" in warnings[0], err
    assert result.exit_code == 0


def test_headers_and_service_name_from_the_config_reach_the_collector(tmp_path):
    with otlp_receiver() as collector:
        config = tmp_path / "docpilot.yaml"
        config.write_text(json.dumps({"telemetry": {"endpoint": collector.url, "service_name": "docs-nightly",
                                                    "headers": {"x-dataset": "docs"}}}))
        out = tmp_path / "r.json"
        result = CliRunner().invoke(main, ["eval", "--config", str(config), *BASE, "--out", str(out)],
                                    catch_exceptions=False)
        spans = list(collector.spans)
    assert result.exit_code == 0
    assert collector.requests and all(headers["x-dataset"] == "docs" for headers in collector.requests)
    assert {span.resource["service.name"] for span in spans} == {"docs-nightly"}
    written = json.loads(out.read_text())
    assert "telemetry" not in written["config"]
    assert all("timeline" not in row for row in written["rows"])  # the stages' start times stay in memory


_FRESH_EVAL = (
    "import json, sys\n"
    "from docpilot.cli import main\n"
    "try:\n"
    "    main(['eval', '--orchestrator', 'inline', '--limit', '5', '--out', sys.argv[1]])\n"
    "except SystemExit as exit:\n"
    "    code = exit.code\n"
    "otel = sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry')\n"
    "code_of = sorted(m for m in otel if getattr(sys.modules[m], '__file__', None))\n"
    "print(json.dumps({'code': code, 'otel': otel, 'otel_code': code_of}))\n"
)


def _fresh_eval(tmp_path, **env: str) -> tuple[dict, str]:
    """The demo eval (the project's docs and golden set) in a fresh interpreter: its exit code and what it imported."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([*env.pop("PREPEND", "").split(os.pathsep), str(ROOT)]).strip(os.pathsep), **env}
    out = subprocess.run([sys.executable, "-c", _FRESH_EVAL, str(tmp_path / "r.json")], cwd=ROOT, env=environ,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_an_eval_without_tracing_imports_no_opentelemetry(tmp_path):
    result, stderr = _fresh_eval(tmp_path)
    assert result == {"code": 0, "otel": [], "otel_code": []}
    assert "warning" not in stderr


def test_a_missing_extra_is_one_line_that_names_it_and_the_run_goes_on(tmp_path):
    # An opentelemetry package that cannot be imported stands in for one that is not installed.
    blocked = tmp_path / "blocked" / "opentelemetry"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed here')\n")
    result, stderr = _fresh_eval(tmp_path, PREPEND=str(blocked.parent),
                                 OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{_closed_port()}")
    assert result["code"] == 0
    lines = [line for line in stderr.splitlines() if "docpilot[telemetry]" in line]
    assert len(lines) == 1 and "OTEL_EXPORTER_OTLP_ENDPOINT" in lines[0], stderr
    assert "Traceback" not in stderr


def test_a_traced_eval_leaves_making_and_encoding_its_spans_to_a_process_of_its_own(tmp_path):
    with otlp_receiver() as collector:
        result, stderr = _fresh_eval(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
        spans = list(collector.spans)
    # The eval's own process looked the extra up (namespace packages, no code) and imported none of it.
    assert result["code"] == 0 and result["otel_code"] == [], result
    assert "warning" not in stderr
    report = load_report(tmp_path / "r.json")
    records = [span for span in spans if span.name == "record"]
    assert sorted(span.attributes["docpilot.record.id"] for span in records) == sorted(row.id for row in report.rows)


def test_a_sending_process_killed_mid_run_is_one_warning_that_says_so(tmp_path, monkeypatch, capfd):
    from docpilot.telemetry import outbox

    started: list[subprocess.Popen] = []
    real_start = outbox.start_child

    def start_and_kill(*args, **kwargs):
        child = real_start(*args, **kwargs)
        started.append(child)
        os.kill(child.pid, signal.SIGKILL)  # a real signal: the child is gone before it reads a frame
        child.wait()
        return child

    monkeypatch.setattr(outbox, "start_child", start_and_kill)
    with otlp_receiver() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        result, report = _eval(tmp_path)
        received = list(collector.spans)
    err = result.stderr + capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "spans were not sent" in line]
    assert len(started) == 1 and received == []
    assert len(warnings) == 1 and "ended early (exit code -9)" in warnings[0], err
    assert "Traceback" not in err
    assert result.exit_code == 0 and report.verdict == "pass"


def test_with_the_server_runtime_each_served_turn_sits_under_its_records_span(tmp_path, monkeypatch):
    # The eval starts `docpilot serve` itself; the server, traced by the same settings, is
    # asked each question with a traceparent naming the record's span.
    with otlp_receiver() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        out = tmp_path / "r.json"
        result = CliRunner().invoke(main, ["eval", *BASE, "--runtime", "server", "--out", str(out)],
                                    catch_exceptions=False)
        report = load_report(out)
        asked = [row for row in report.rows if row.kind != "attack"]
        spans = collector.wait_for(len(asked) * 2, timeout_s=10)
    assert result.exit_code == 0, result.output
    (root,) = [span for span in spans if span.name == "eval"]
    records = {span.attributes["docpilot.record.id"]: span for span in spans if span.name == "record"}
    turns = [span for span in spans if span.name == "turn"]
    assert len(turns) == len(asked) and set(records) == {row.id for row in report.rows}
    by_span = {span.span_id: span for span in records.values()}
    for turn in turns:
        record = by_span[turn.parent_id]  # the record whose question the server answered
        assert turn.trace_id == root.trace_id
        assert record.start_ns <= turn.start_ns and turn.end_ns <= record.end_ns + 5_000_000  # clocks of two processes
