"""``docpilot serve`` with tracing on: a span per turn, its stages under it, as a real collector receives them."""

from __future__ import annotations

import logging
import subprocess
import sys

import httpx
import pytest

from docpilot.assistant.workspace import open_workspace
from docpilot.config.model import Config
from docpilot.models.registry import build_model
from docpilot.server.app import create_app, serve_in_thread
from tests.conftest import DATA, ROOT
from tests.docpilot.telemetry.test_eval_traces import _closed_port
from tests.support.otlp_receiver import otlp_receiver
from tests.support.scratch import scratch_folder

pytestmark = pytest.mark.slow

DOCS = DATA / "pipeline" / "docs"
CACHE = scratch_folder("docpilot-test-serve-traces-")
TOLERANCE_MS = 0.01


class _Heard(logging.Handler):
    """Keeps the records a logger hands it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _serve(endpoint: str, **telemetry: object):
    config = Config.model_validate({"corpus": {"docs": str(DOCS)}, "cache_dir": CACHE,
                                    "telemetry": {"endpoint": endpoint, **telemetry}})
    workspace = open_workspace(config, use_cache=False)
    app = create_app(workspace, build_model(config.model, corpus=workspace.corpus), token=None)
    return serve_in_thread(app)


@pytest.mark.parametrize("stream", [False, True])
def test_each_served_turn_is_a_trace_with_its_stages(stream):
    with otlp_receiver() as collector:
        with _serve(collector.url) as url:
            replies = [httpx.post(f"{url}/v1/ask", json={"question": "How do I install Acme?", "stream": stream},
                                  timeout=30) for _ in range(2)]
        # The server sent what was left as it stopped.
        spans = collector.wait_for(2 * 5, timeout_s=5)
    assert all(reply.status_code == 200 for reply in replies)
    turns = [span for span in spans if span.name == "turn"]
    assert len(turns) == 2 and len({turn.trace_id for turn in turns}) == 2
    request_ids = {turn.attributes["docpilot.request_id"] for turn in turns}
    if not stream:
        assert request_ids == {reply.json()["request_id"] for reply in replies}
    for turn in turns:
        assert turn.parent_id == "" and turn.kind == 2  # SPAN_KIND_SERVER
        stages = {span.name: span for span in spans if span.parent_id == turn.span_id}
        assert sorted(stages) == ["embed", "model", "render", "retrieve"]
        for stage in stages.values():
            assert turn.start_ns <= stage.start_ns <= stage.end_ns <= turn.end_ns, stage.name
        assert stages["embed"].end_ns == stages["retrieve"].start_ns
        assert stages["retrieve"].end_ns == stages["model"].start_ns
        ((event, at, _),) = stages["model"].events
        assert event == "first token" and stages["model"].start_ns <= at <= stages["model"].end_ns
    if not stream:
        # The spans' times are the turn's own, as its Server-Timing header tells them.
        for reply in replies:
            timing = reply.json()["timing"]
            (turn,) = [t for t in turns if t.attributes["docpilot.request_id"] == reply.json()["request_id"]]
            stages = {span.name: span for span in spans if span.parent_id == turn.span_id}
            for name in ("embed", "retrieve", "model"):
                assert stages[name].duration_ms == pytest.approx(timing[f"{name}_ms"], abs=TOLERANCE_MS)
            assert turn.duration_ms >= timing["total_ms"] - TOLERANCE_MS


def test_a_server_without_tracing_imports_no_opentelemetry():
    code = (
        "import sys, httpx\n"
        "from docpilot.config.model import Config\n"
        "from docpilot.models.registry import build_model\n"
        "from docpilot.assistant.workspace import open_workspace\n"
        "from docpilot.server.app import create_app, serve_in_thread\n"
        "config = Config.model_validate({'corpus': {'docs': sys.argv[1]}, 'cache_dir': sys.argv[2]})\n"
        "workspace = open_workspace(config, use_cache=False)\n"
        "app = create_app(workspace, build_model(config.model, corpus=workspace.corpus), token=None)\n"
        "with serve_in_thread(app) as url:\n"
        "    assert httpx.post(url + '/v1/ask', json={'question': 'How do I install Acme?'}).status_code == 200\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(DOCS), CACHE], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_server_whose_collector_is_down_still_answers_and_says_so_once(caplog):
    # Read at the server's own logger, switched on for the test: logging set up by an
    # earlier test of this process (a served app, Prefect) may have stopped its propagation,
    # raised its level or disabled it, and then the root's capture sees nothing.
    heard = _Heard()
    server_log = logging.getLogger("docpilot.server")
    was = server_log.disabled, server_log.level
    server_log.disabled = False
    server_log.setLevel(logging.WARNING)
    server_log.addHandler(heard)
    try:
        with _serve(f"http://127.0.0.1:{_closed_port()}", timeout_s=1) as url:
            reply = httpx.post(f"{url}/v1/ask", json={"question": "How do I install Acme?", "stream": False},
                               timeout=30)
    finally:
        server_log.removeHandler(heard)
        server_log.disabled, server_log.level = was
    assert reply.status_code == 200 and reply.json()["answer"]
    said = [r.getMessage() for r in heard.records if "not sent" in r.getMessage()]
    assert len(said) == 1 and "connection refused" in said[0], said
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


def test_a_traceparent_puts_the_turn_under_the_callers_span_and_a_malformed_one_is_ignored():
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = [{"traceparent": f"00-{caller_trace}-{caller_span}-01"},
               {"traceparent": f"00-{'0' * 32}-{caller_span}-01"},  # an all-zero trace id is invalid
               {"traceparent": "not a traceparent"}]
    with otlp_receiver() as collector:
        with _serve(collector.url) as url:
            replies = [httpx.post(f"{url}/v1/ask", json={"question": "How do I install Acme?", "stream": False},
                                  headers=h, timeout=30) for h in headers]
        spans = collector.wait_for(3 * 5, timeout_s=5)
    assert all(reply.status_code == 200 for reply in replies)
    turns = {t.attributes["docpilot.request_id"]: t for t in spans if t.name == "turn"}
    joined, zero, malformed = (turns[reply.json()["request_id"]] for reply in replies)
    assert (joined.trace_id, joined.parent_id) == (caller_trace, caller_span)
    for alone in (zero, malformed):
        assert alone.parent_id == "" and alone.trace_id != caller_trace
    # The stages stay under their turn, in its trace.
    assert all(s.trace_id == caller_trace for s in spans if s.parent_id == joined.span_id)
