"""The eval's server client against a real server: timings over the network, traces the eval can score."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC
from pathlib import Path

import aiohttp
import httpx
import pytest

from docpilot.api.client import RemoteTurn, ask, ask_url
from docpilot.assistant.workspace import Workspace, open_workspace
from docpilot.config.model import Config
from docpilot.errors import ConfigError, ModelError
from docpilot.golden.loading import load_golden
from docpilot.models.base import Prompt
from docpilot.models.registry import build_model
from docpilot.run.remote import local_server
from docpilot.run.road import (
    build_rows,
    prime_shard,
    render_shard,
    start_traces,
)
from docpilot.server.app import create_app, serve_in_thread
from tests.support.model_stage import model_shard, retrieve_shard, served_shard
from tests.support.scratch import scratch_folder
from tests.support.scripted_http import DROP, Reply, Request, scripted

DATA = Path(__file__).resolve().parents[2] / "data" / "pipeline"
TOKEN = "remote-test-token-42"
# Fields a row shares between runtimes; times and cache marks differ by nature.
SHARED = ("retrieved", "scores", "primed", "answer", "reasoning", "citations", "markers", "hallucinated",
          "sources_shown", "links", "refused", "refused_by", "refusal_cause", "error", "answer_language")  # fmt: skip


# The search index is saved under cache_dir; keep it out of the checkout.
CACHE = scratch_folder("docpilot-test-remote-")


def _config(**settings: object) -> Config:
    return Config.model_validate({"corpus": {"docs": str(DATA / "docs")}, "cache_dir": CACHE, **settings})


def _workspace(**settings: object) -> Workspace:
    return open_workspace(_config(**settings), use_cache=False)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    workspace = _workspace()
    app = create_app(workspace, build_model(workspace.config.model, corpus=workspace.corpus), token=TOKEN)
    with serve_in_thread(app) as base:
        yield base


def _ask(url: str, question: str, token: str | None = TOKEN, scope: list[str] | None = None) -> RemoteTurn:
    async def run() -> RemoteTurn:
        async with aiohttp.ClientSession() as session:
            return await ask(session, url, question, scope, token)

    return asyncio.run(run())


class ThinkingModel:
    """Thinks aloud for a moment, then answers: first thought, then first token, then the end."""

    async def stream(self, prompt: Prompt) -> AsyncIterator[tuple[str, str] | str]:
        yield "thought", "Source 1 covers installing. "
        await asyncio.sleep(0.1)  # apart enough that the two never share a read
        yield "Install with pip "
        await asyncio.sleep(0.05)
        yield "[1]."

    async def complete(self, prompt: Prompt):  # pragma: no cover - the server streams
        raise NotImplementedError


class HeldModel:
    """Answers once the test lets it."""

    def __init__(self) -> None:
        self.go = threading.Event()

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        while not self.go.is_set():
            await asyncio.sleep(0.01)
        yield "Install with pip [1]."

    async def complete(self, prompt: Prompt):  # pragma: no cover - the server streams
        raise NotImplementedError


def test_ask_url_accepts_a_base_or_the_endpoint():
    assert ask_url("http://h:1/") == "http://h:1/v1/ask"
    assert ask_url("http://h:1/v1/ask") == "http://h:1/v1/ask"


def test_ask_times_the_turn_and_the_server_stages_fit_inside_it(url):
    turn = _ask(url, "How do I install Acme?")
    assert turn.error is None and turn.status == 200
    assert [e.name for e in turn.events][0] == "retrieval" and turn.events[-1].name == "done"
    assert turn.retrieval_ms <= turn.first_token_ms <= turn.latency_ms
    assert turn.first_thought_ms is None
    stages = turn.stages_ms()
    assert set(stages) == {"embed", "retrieve", "model"}
    assert sum(stages.values()) <= turn.timing.total_ms <= turn.latency_ms
    assert turn.answer.endswith("[1]") and turn.citations.citations == ["index#install"]
    assert [e.at_ms for e in turn.events] == sorted(e.at_ms for e in turn.events)


def test_a_refused_turn_counts_its_first_token_at_its_latency(url):
    turn = _ask(url, "How much does the enterprise plan cost per month?")
    assert turn.refusal is not None and turn.refusal.refused_by == "model"
    assert turn.answer.startswith("REFUSE: not-answerable")
    assert turn.first_token_ms == turn.latency_ms


def test_first_thought_comes_before_first_token():
    with serve_in_thread(create_app(_workspace(), ThinkingModel(), token=None)) as base:
        turn = _ask(base, "How do I install Acme?", token=None)
    assert turn.reasoning == "Source 1 covers installing. "
    assert turn.first_thought_ms < turn.first_token_ms < turn.latency_ms


def test_a_wrong_token_is_an_error_not_an_exception(url):
    turn = _ask(url, "How do I install Acme?", token="nope")
    assert turn.status == 401 and "DOCPILOT_SERVER_TOKEN" in turn.error and "nope" not in turn.error
    assert turn.error_code == "auth"
    assert turn.latency_ms is not None and turn.retrieval is None


def test_no_server_is_an_error_not_an_exception():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens on it
    turn = _ask(f"http://127.0.0.1:{port}", "How do I install Acme?")
    assert turn.status is None and turn.error.startswith("no reply from") and turn.error_code == "connect"


def test_a_busy_server_is_retried_after_retry_after():
    model = HeldModel()
    with serve_in_thread(create_app(_workspace(), model, token=None, max_concurrency=1, queue_depth=0)) as base:

        async def run() -> tuple[RemoteTurn, RemoteTurn]:
            async def health(session: aiohttp.ClientSession) -> dict:
                async with session.get(f"{base}/healthz") as response:
                    return await response.json()

            async with aiohttp.ClientSession() as session:
                first = asyncio.create_task(ask(session, base, "How do I install Acme?"))
                while (await health(session))["in_flight"] == 0:
                    await asyncio.sleep(0.01)  # until the first question holds the only slot
                second = asyncio.create_task(ask(session, base, "How do I install Acme?"))
                while (await health(session))["turned_away"] == 0:
                    await asyncio.sleep(0.01)  # until the server has answered the second with 503
                model.go.set()
                return await first, await second

        first, second = asyncio.run(run())
    assert first.error is None and second.error is None
    assert second.latency_ms >= 1000  # it waited out the 503's Retry-After: 1


def test_a_connection_dropped_before_any_reply_is_asked_again():
    calls = []
    stream = (b'event: retrieval\ndata: {"hits":[],"primed":[]}\n\nevent: token\ndata: {"text":"Run pip."}\n\n'
              b'event: done\ndata: {"request_id":"r"}\n\n')

    def handler(n: int, request: Request) -> Reply | object:
        calls.append(request)
        if n == 1:  # the server closed the kept-alive connection as it was reused
            return DROP
        return Reply(200, {"content-type": "text/event-stream"}, stream)

    turn = _ask_scripted(handler)
    assert len(calls) == 2 and turn.error is None and [e.name for e in turn.events] == ["retrieval", "token", "done"]


def test_a_stream_cut_before_done_is_an_error():
    cut = b'event: retrieval\ndata: {"hits":[],"primed":[]}\n\nevent: token\ndata: {"text":"Inst'

    turn = _ask_scripted(lambda n, request: Reply(200, {"content-type": "text/event-stream"}, cut))
    assert turn.error.startswith("the stream ended before its `done` event") and turn.latency_ms is not None
    assert turn.error_code == "incomplete"


def _local_rows(records):
    workspace = _workspace()
    traces = start_traces(records)
    for stage in (retrieve_shard, prime_shard, model_shard, render_shard):
        traces = stage(workspace, traces)
    return build_rows(traces)


def test_remote_shard_fills_traces_that_score_like_the_local_runtime(url):
    records = load_golden(DATA / "golden.yaml")
    workspace = _workspace()
    traces, stages = served_shard(workspace, start_traces(records), url, token=TOKEN, concurrency=3)
    rows = build_rows(render_shard(workspace, traces))
    local = {row.id: row for row in _local_rows(records)}
    assert [row.id for row in rows] == [r.id for r in records]
    for row in rows:
        expected = local[row.id]
        assert {f: getattr(row, f) for f in SHARED} == {f: getattr(expected, f) for f in SHARED}, row.id
        assert set(stages[row.id]) == {"embed", "retrieve", "model"}
        assert sum(stages[row.id].values()) <= row.latency_ms
        if row.answered:
            assert row.first_token_ms <= row.latency_ms
    assert any(row.refused for row in rows) and any(row.answered for row in rows)


def test_remote_shard_row_latency_is_the_network_latency(url):
    records = load_golden(DATA / "golden.yaml")[:1]
    workspace = _workspace()
    traces, _ = served_shard(workspace, start_traces(records), url, token=TOKEN)
    trace = traces[0]
    row = build_rows(render_shard(workspace, traces))[0]
    assert row.latency_ms == pytest.approx(trace.retrieve_ms + trace.turn.latency_ms, abs=1e-3)
    assert trace.prompt.sources and all(s.text == "" for s in trace.prompt.sources)


def test_remote_shard_reads_the_token_from_the_environment(url, monkeypatch):
    monkeypatch.setenv("DOCPILOT_SERVER_TOKEN", TOKEN)
    records = load_golden(DATA / "golden.yaml")[:1]
    traces, stages = served_shard(_workspace(), start_traces(records), url)
    assert traces[0].turn.error is None and list(stages) == [records[0].id]


def test_a_gate_refusal_over_the_network_is_a_gate_refusal():
    workspace = _workspace(guard={"mode": "on", "threshold": 1e9})
    app = create_app(workspace, build_model(workspace.config.model, corpus=workspace.corpus), token=None)
    records = load_golden(DATA / "golden.yaml")[:2]
    with serve_in_thread(app) as base:
        traces, stages = served_shard(workspace, start_traces(records), base)
    rows = build_rows(render_shard(workspace, traces))
    assert all(t.gate_refused and t.turn is None for t in traces)
    assert all(r.refused_by == "gate" and r.latency_ms > 0 for r in rows)
    assert all(stages[r.id]["model"] == 0 for r in rows)


def test_a_server_that_is_down_fails_the_shard_before_any_question():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    records = load_golden(DATA / "golden.yaml")[:1]
    with pytest.raises(ConfigError, match="cannot reach the server"):
        served_shard(_workspace(), start_traces(records), f"http://127.0.0.1:{port}")


def test_a_server_with_other_docs_fails_the_shard(url, tmp_path):
    other = tmp_path / "docs"
    other.mkdir()
    (other / "index.md").write_text("# Other\n\nSomething else entirely.\n", encoding="utf-8")
    workspace = open_workspace(_config(corpus={"docs": str(other)}), use_cache=False)
    records = load_golden(DATA / "golden.yaml")[:1]
    with pytest.raises(ConfigError, match="other docs"):
        served_shard(workspace, start_traces(records), url, token=TOKEN)


def test_a_failed_question_becomes_an_errored_row(url):
    records = load_golden(DATA / "golden.yaml")[:1]
    workspace = _workspace()
    traces, stages = served_shard(workspace, start_traces(records), url, token="wrong")
    row = build_rows(render_shard(workspace, traces))[0]
    assert row.error.startswith("HTTP 401") and row.answer == "" and stages == {}
    assert row.error_code == "auth"
    assert row.latency_ms > 0 and row.retrieved == []


@pytest.mark.slow
def test_local_server_runs_docpilot_serve_and_stops_it():
    with local_server(_config()) as base:
        health = httpx.get(f"{base}/healthz").json()
        assert health["auth"] == "off" and health["pages"] == 3
        turn = _ask(base, "How do I install Acme?", token=None)
        assert turn.error is None and turn.answer
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base}/healthz")


@pytest.mark.slow
def test_local_server_in_process():
    with local_server(_config(), in_process=True, max_concurrency=4) as base:
        assert httpx.get(f"{base}/healthz").json()["max_concurrency"] == 4


@pytest.mark.slow
def test_local_server_only_on_loopback():
    with pytest.raises(ConfigError, match="loopback"), local_server(_config(), host="0.0.0.0"):
        pass  # pragma: no cover


@pytest.mark.slow
def test_local_server_reports_a_server_that_cannot_start(tmp_path):
    with pytest.raises(ConfigError, match="local server exited"):
        with local_server(_config(corpus={"docs": str(tmp_path / "missing")})):
            pass  # pragma: no cover


def _ask_scripted(handler) -> RemoteTurn:
    """Ask a server on 127.0.0.1 whose every reply ``handler`` scripts (``tests.support.scripted_http``)."""
    with scripted(handler) as base:
        return _ask(base, "How do I install Acme?", token=None)


def _sse(*events: tuple[str, str]) -> bytes:
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in events)


# Regression: a server turn that ended with no answer text was scored as an (empty) answer.
def test_a_turn_done_without_answer_text_or_refusal_is_an_error():
    body = _sse(("retrieval", '{"hits":[],"primed":[]}'), ("token", '{"text":"  "}'), ("done", '{"request_id":"r"}'))
    turn = _ask_scripted(lambda n, request: Reply(200, {"content-type": "text/event-stream"}, body))
    assert turn.error is not None and "no answer text and no refusal" in turn.error
    assert turn.error_code == "empty"


class UnfinishedModel:
    """A model whose service ends every turn without saying it finished."""

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        yield "Install with"
        raise ModelError("the service closed the stream with [DONE] but never said the turn finished",
                         code="unfinished")

    async def complete(self, prompt: Prompt):  # pragma: no cover - the server streams
        raise NotImplementedError


def test_the_servers_error_event_gives_the_rows_error_code():
    with serve_in_thread(create_app(_workspace(), UnfinishedModel(), token=None)) as base:
        turn = _ask(base, "How do I install Acme?", token=None)
    assert turn.error.startswith("model_unfinished:") and turn.error_code == "unfinished"


def test_white_space_is_not_the_first_token_and_events_may_arrive_in_any_pieces():
    body = _sse(("retrieval", '{"hits":[],"primed":[]}'), ("token", '{"text":"\\n"}'), ("token", '{"text":"Run pip."}'),
                ("done", '{"request_id":"r"}'))

    # One byte at a time, with CRLF line ends: the reader the openai model uses joins them.
    crlf = body.replace(b"\n", b"\r\n")
    pieces = [crlf[i : i + 1] for i in range(len(crlf))]
    turn = _ask_scripted(lambda n, request: Reply(200, {"content-type": "text/event-stream"}, pieces=pieces,
                                                  pause_s=0.001))
    assert turn.error is None and turn.answer == "Run pip."
    tokens = [event.at_ms for event in turn.events if event.name == "token"]
    assert turn.first_token_ms == tokens[1]


def test_a_503_retry_after_given_as_an_http_date_is_read():
    from datetime import datetime, timedelta
    from email.utils import format_datetime

    calls = []
    body = _sse(("retrieval", '{"hits":[],"primed":[]}'), ("token", '{"text":"Run pip."}'), ("done", '{"request_id":"r"}'))

    def handler(n: int, request: Request) -> Reply:
        calls.append(request)
        if n == 1:
            when = format_datetime(datetime.now(UTC) - timedelta(seconds=5), usegmt=True)
            return Reply(503, {"retry-after": when, "content-type": "application/json"},
                         b'{"error": {"message": "full"}}')
        return Reply(200, {"content-type": "text/event-stream"}, body)

    turn = _ask_scripted(handler)
    # A date in the past means "now": the old parser read it as unreadable and waited 1 s.
    assert len(calls) == 2 and turn.error is None and turn.latency_ms < 1000
