"""The HTTP server against real clients: a uvicorn server on 127.0.0.1, the fixture docs, real sockets."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from docpilot.assistant.workspace import Workspace, open_workspace
from docpilot.config.model import Config, RetrievalConfig
from docpilot.errors import ModelError
from docpilot.models.base import Prompt, Turn
from docpilot.models.registry import build_model
from docpilot.retrieval.rankers import Retriever
from docpilot.run.road import (
    prime_shard,
    render_shard,
    start_traces,
)
from docpilot.schema import GoldenRecord
from docpilot.server.app import create_app, serve_in_thread
from tests.docpilot.retrieval.test_embedders import WordHashEmbedder
from tests.support.model_stage import model_shard, retrieve_shard
from tests.support.scratch import scratch_folder

DOCS = Path(__file__).resolve().parents[2] / "data" / "pipeline" / "docs"
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AUTH_JSON = {**AUTH, "Content-Type": "application/json"}
ANSWERABLE = "How do I install Acme?"
UNANSWERABLE = "How much does the enterprise plan cost per month?"


# The search index is saved under cache_dir; keep it out of the checkout.
CACHE = scratch_folder("docpilot-test-server-")


def _config(**settings: object) -> Config:
    return Config.model_validate({"corpus": {"docs": str(DOCS)}, "cache_dir": CACHE, **settings})


def _workspace(**settings: object) -> Workspace:
    return open_workspace(_config(**settings), use_cache=False)


def _events(text: str) -> list[tuple[str, dict]]:
    """The (name, data) pairs of a server-sent event stream."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def _names(events: list[tuple[str, dict]]) -> list[str]:
    return [name for name, _ in events]


class ScriptedModel:
    """A model whose streamed pieces a test chooses; it can wait for a signal, dawdle, raise, or stream forever."""

    def __init__(
        self,
        pieces: list[str | tuple[str, str]] | None = None,
        *,
        delay_s: float = 0.0,
        hold: threading.Event | None = None,
        forever: bool = False,
        raises: Exception | None = None,
    ) -> None:
        self.pieces = pieces if pieces is not None else ["Install ", "Acme ", "with ", "pip [1]."]
        self.delay_s = delay_s
        self.hold = hold
        self.forever = forever
        self.raises = raises
        self.sent = 0
        self.closed = threading.Event()

    async def stream(self, prompt: Prompt) -> AsyncIterator[str | tuple[str, str]]:
        try:
            if self.raises is not None:
                raise self.raises
            while self.hold is not None and not self.hold.is_set():
                await asyncio.sleep(0.01)
            index = 0
            while index < len(self.pieces) or self.forever:
                await asyncio.sleep(self.delay_s)
                yield self.pieces[index % len(self.pieces)]
                self.sent += 1
                index += 1
        finally:
            self.closed.set()

    async def complete(self, prompt: Prompt) -> Turn:
        parts = [p if isinstance(p, str) else "" for p in self.pieces]
        return Turn(answer="".join(parts).strip(), latency_ms=0.0)


class SlowEmbedder(WordHashEmbedder):
    """A test embedder that takes a noticeable time per call, as a real model would."""

    delay_s = 0.05

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        time.sleep(self.delay_s)
        return super().embed(texts)


class WholeModel:
    """A model with no ``stream``: its turn arrives whole."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn

    async def complete(self, prompt: Prompt) -> Turn:
        return self.turn


@pytest.fixture(scope="module")
def workspace() -> Workspace:
    return _workspace()


@pytest.fixture(scope="module")
def url(workspace: Workspace) -> Iterator[str]:
    """A server with the extractive model and a token."""
    app = create_app(workspace, build_model(workspace.config.model, corpus=workspace.corpus), token=TOKEN)
    with serve_in_thread(app) as base:
        yield base


def _serve(model: object, *, workspace: Workspace | None = None, **options: object):
    options.setdefault("token", None)
    return serve_in_thread(create_app(workspace or _workspace(), model, **options))  # type: ignore[arg-type]


def _ask(url: str, question: str = ANSWERABLE, headers: dict | None = None, **body: object) -> httpx.Response:
    headers = AUTH if headers is None else headers
    return httpx.post(f"{url}/v1/ask", json={"question": question, **body}, headers=headers)


def _local(workspace: Workspace, question: str):
    """The local runtime's trace for one question: the stages the eval runs."""
    traces = start_traces([GoldenRecord(id="q", question=question, gold=["index"])])
    for stage in (retrieve_shard, prime_shard, model_shard, render_shard):
        traces = stage(workspace, traces)
    return traces[0]


# The event stream ---------------------------------------------------------------


def test_an_answer_streams_retrieval_tokens_citations_timing_done(url, workspace):
    response = _ask(url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response.text)
    names = _names(events)
    assert names[0] == "retrieval" and names[-2:] == ["timing", "done"]
    assert names[1:-3] == ["token"] * (len(names) - 4) and len(names) > 4
    assert names[-3] == "citations"
    data = dict(events)
    assert len(data["retrieval"]["hits"]) <= 8 and 1 <= len(data["retrieval"]["primed"]) <= 5
    assert set(data["retrieval"]["primed"][0]) == {"n", "section_id", "title", "url"}
    assert data["done"]["request_id"] == response.headers["x-request-id"]
    assert set(data["timing"]) == {"embed_ms", "retrieve_ms", "model_ms", "total_ms"}
    timing = data["timing"]
    assert timing["embed_ms"] + timing["retrieve_ms"] + timing["model_ms"] <= timing["total_ms"]


@pytest.mark.slow
def test_the_server_gives_what_the_local_runtime_gives(url, workspace):
    trace = _local(workspace, ANSWERABLE)
    events = _events(_ask(url).text)
    data = dict(events)
    assert [(h["section_id"], h["score"]) for h in data["retrieval"]["hits"]] == [
        (h["section_id"], h["score"]) for h in trace.hits
    ]
    assert [p["section_id"] for p in data["retrieval"]["primed"]] == [s.section_id for s in trace.prompt.sources]
    answer = "".join(d["text"] for name, d in events if name == "token").strip()
    assert answer == trace.turn.answer
    assert data["citations"] == trace.panel.model_dump()


def test_a_model_refusal_paints_no_tokens(url):
    events = _events(_ask(url, UNANSWERABLE).text)
    assert _names(events) == ["retrieval", "refusal", "timing", "done"]
    refusal = dict(events)["refusal"]
    assert refusal["refused_by"] == "model" and refusal["cause"] == "not-answerable"
    assert refusal["reply"].startswith("REFUSE: not-answerable")


def test_the_retrieval_gate_refuses_before_the_model():
    model = ScriptedModel()
    with _serve(model, workspace=_workspace(guard={"mode": "on", "threshold": 1e9})) as base:
        events = _events(_ask(base, headers={}).text)
    assert _names(events) == ["retrieval", "refusal", "timing", "done"]
    data = dict(events)
    assert data["refusal"]["refused_by"] == "gate" and data["refusal"]["reply"] is None
    assert data["timing"]["model_ms"] == 0 and model.sent == 0


def test_reasoning_streams_as_thought_events_apart_from_the_answer():
    model = ScriptedModel([("thought", "Source 1 says pip. "), ("thought", "So: pip."), "Use ", "pip [1]."])
    with _serve(model) as base:
        events = _events(_ask(base, headers={}).text)
        result = _ask(base, headers={}, stream=False).json()
    assert _names(events)[:5] == ["retrieval", "thought", "thought", "token", "token"]
    assert result["reasoning"] == "Source 1 says pip. So: pip." and result["answer"] == "Use pip [1]."


def test_a_refusal_split_across_pieces_is_still_held_back():
    with _serve(ScriptedModel(["  REF", "USE: out-", "of-scope\n", "Not about the docs."])) as base:
        events = _events(_ask(base, headers={}).text)
    assert "token" not in _names(events)
    assert dict(events)["refusal"]["cause"] == "out-of-scope"


def test_an_answer_that_starts_like_the_protocol_is_sent_whole():
    with _serve(ScriptedModel(["Ref", "unds take ", "a week [1]."])) as base:
        events = _events(_ask(base, headers={}).text)
    assert "".join(d["text"] for name, d in events if name == "token") == "Refunds take a week [1]."
    assert "citations" in _names(events)


def test_a_model_without_stream_sends_its_turn_whole():
    with _serve(WholeModel(Turn(answer="Install it with pip [1].", reasoning="Easy."))) as base:
        events = _events(_ask(base, headers={}).text)
    tokens = [d["text"] for name, d in events if name == "token"]
    assert tokens == ["Install it with pip [1]."] and _names(events).count("thought") == 1


def test_embed_is_the_query_embedding_for_a_dense_retriever():
    corpus = _workspace().corpus
    embedder = SlowEmbedder()
    settings = RetrievalConfig(retriever="hybrid")
    workspace = Workspace(
        config=_config(retrieval=settings.model_dump()),
        corpus=corpus,
        _retriever=Retriever(corpus, settings, embedder=embedder),
        chunks={c.id: c for c in corpus.chunks},
        cache=None,
    )
    embedder.calls = 0  # the index was embedded while it was built
    with _serve(ScriptedModel(), workspace=workspace) as base:
        timing = dict(_events(_ask(base, headers={}).text))["timing"]
    assert embedder.calls == 1  # the question is embedded once, by the search itself
    assert timing["embed_ms"] >= SlowEmbedder.delay_s * 1000
    assert timing["retrieve_ms"] < timing["embed_ms"]
    assert timing["embed_ms"] + timing["retrieve_ms"] + timing["model_ms"] <= timing["total_ms"]


# The JSON reply ------------------------------------------------------------------


def test_stream_false_returns_the_same_facts_and_server_timing(url, workspace):
    response = _ask(url, stream=False)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    result = response.json()
    trace = _local(workspace, ANSWERABLE)
    assert result["answer"] == trace.turn.answer and result["citations"] == trace.panel.model_dump()
    assert result["refusal"] is None and result["error"] is None
    parts = [part.strip().split(";dur=") for part in response.headers["server-timing"].split(",")]
    timing = {name: float(value) for name, value in parts}
    assert set(timing) == {"embed", "retrieve", "model", "total"}
    assert timing["model"] == pytest.approx(result["timing"]["model_ms"], abs=1e-3)


# Security and limits -------------------------------------------------------------


def test_a_missing_token_is_401_with_a_bearer_challenge(url):
    response = _ask(url, headers={})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "unauthorized"


def test_a_wrong_token_is_401_invalid_token_and_never_echoed(url):
    response = _ask(url, headers={"Authorization": "Bearer not-the-token"})
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert "not-the-token" not in response.text and TOKEN not in response.text
    assert _ask(url, headers={"Authorization": TOKEN}).status_code == 401  # no scheme


def test_the_right_token_passes(url):
    assert _ask(url, headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200


def test_a_body_over_the_limit_is_413_declared_or_chunked(url):
    big = json.dumps({"question": "x" * 70_000})
    assert httpx.post(f"{url}/v1/ask", content=big, headers=AUTH_JSON).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server has to count
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000].encode()

    response = httpx.post(f"{url}/v1/ask", content=chunks(), headers=AUTH_JSON)
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"question": "x" * 2001}, "the limit is 2000"),
        ({"question": "   "}, "the question is empty"),
        ({"questoin": "typo"}, "questoin"),
        ({"question": "ok", "scope": "guide"}, "scope"),
        ({"question": "ok", "language": "not a tag"}, "BCP-47"),
        ([1, 2], "body"),
    ],
)
def test_bad_requests_are_422_with_a_clear_message(url, body, says):
    response = httpx.post(f"{url}/v1/ask", json=body, headers=AUTH)
    assert response.status_code == 422
    assert says in response.json()["error"]["message"]


def test_a_body_that_is_not_json_is_422(url):
    response = httpx.post(f"{url}/v1/ask", content=b"question=hi", headers=AUTH_JSON)
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_json"


def test_a_full_server_with_no_queue_answers_503_with_retry_after_at_once():
    hold = threading.Event()
    model = ScriptedModel(hold=hold)
    with _serve(model, max_concurrency=1, queue_depth=0) as base, httpx.Client() as client:
        with client.stream("POST", f"{base}/v1/ask", json={"question": ANSWERABLE}) as first:
            lines = first.iter_lines()
            assert next(lines) == "event: retrieval"  # the first question holds the only slot
            # Had the server waited for the slot, this would hang until the first question ends.
            busy = client.post(f"{base}/v1/ask", json={"question": ANSWERABLE})
            assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
            assert busy.json()["error"]["code"] == "busy"
            hold.set()
            assert "event: done" in list(lines)
        # The slot is given back as the first stream closes, a moment after its last event.
        deadline = time.monotonic() + 5
        while client.get(f"{base}/healthz").json()["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.post(f"{base}/v1/ask", json={"question": ANSWERABLE}).status_code == 200


def test_a_client_that_disconnects_frees_its_slot_and_stops_the_model():
    model = ScriptedModel(["word "], delay_s=0.005, forever=True)
    with _serve(model, max_concurrency=2) as base, httpx.Client() as client:
        with client.stream("POST", f"{base}/v1/ask", json={"question": ANSWERABLE}) as response:
            lines = response.iter_lines()  # kept alive: dropping it would close the connection early
            while next(lines) != "event: token":
                pass
            assert client.get(f"{base}/healthz").json()["in_flight"] == 1
        # Leaving the block closed the connection mid-stream.
        deadline = time.monotonic() + 5
        while client.get(f"{base}/healthz").json()["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.get(f"{base}/healthz").json()["in_flight"] == 0
        assert model.closed.wait(5)
        sent = model.sent
        time.sleep(0.1)
        assert model.sent == sent  # it stopped generating


def test_an_unexpected_failure_is_a_generic_500_without_internals(caplog):
    secret = "db-password-hunter2 at /srv/app/secret.py line 42"
    with _serve(ScriptedModel(raises=RuntimeError(secret))) as base:
        response = _ask(base, headers={}, stream=False)
        streamed = _ask(base, headers={})
    assert response.status_code == 500
    body = response.json()
    assert body["error"]["code"] == "internal" and body["error"]["request_id"] == response.headers["x-request-id"]
    for text in (response.text, streamed.text):
        assert "Traceback" not in text and "hunter2" not in text and "RuntimeError" not in text and ".py" not in text
    events = _events(streamed.text)
    assert _names(events) == ["retrieval", "error", "done"] and dict(events)["error"]["code"] == "internal"
    assert secret in caplog.text  # the details are in the server's log


def test_a_model_fault_is_a_502_and_an_error_event():
    with _serve(ScriptedModel(raises=ModelError("HTTP 500 from http://10.0.0.7/v1: boom"))) as base:
        response = _ask(base, headers={}, stream=False)
        events = _events(_ask(base, headers={}).text)
    assert response.status_code == 502 and response.json()["error"]["code"] == "model_error"
    assert "10.0.0.7" not in response.text
    assert _names(events) == ["retrieval", "error", "timing", "done"]


def test_a_model_past_its_timeout_ends_the_turn():
    model = ScriptedModel(["word "], delay_s=0.05, forever=True)
    with _serve(model, workspace=_workspace(model={"timeout_s": 0.2})) as base:
        events = _events(_ask(base, headers={}).text)
    assert dict(events)["error"]["code"] == "model_timeout"
    # The event loop's timer may fire a millisecond before the stage's own clock reads 200 ms.
    assert _names(events)[-2:] == ["timing", "done"] and 195 <= dict(events)["timing"]["model_ms"] < 2000
    assert model.closed.wait(5)


# Health and description ------------------------------------------------------------


def test_healthz_names_the_corpus_and_the_model(url, workspace):
    health = httpx.get(f"{url}/healthz").json()
    assert health["status"] == "ok" and health["corpus"] == workspace.corpus.fingerprint
    assert health["model"] == {"provider": "extractive", "name": "extractive-v1"}
    assert health["auth"] == "bearer" and health["in_flight"] == 0 and health["max_concurrency"] == 32
    # One process serves: it is the server's only worker, and all of its capacity.
    (worker,) = health["workers"]
    assert worker["state"] == "up" and worker["capacity"] == 32 and worker["restarts"] == 0
    assert health["worker"] == 0 and health["total"]["capacity"] == 32 and health["total"]["workers_up"] == 1


def test_openapi_describes_both_endpoints_and_every_reference_resolves(url):
    response = httpx.get(f"{url}/openapi.json")
    document = json.loads(response.text)
    assert document["openapi"].startswith("3.1")
    assert {"/v1/ask", "/healthz"} <= set(document["paths"])
    ask = document["paths"]["/v1/ask"]["post"]
    assert {"200", "401", "413", "422", "500", "503"} <= set(ask["responses"])
    assert ask["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/AskRequest"}
    schemas = document["components"]["schemas"]
    assert {"question", "scope", "language", "stream", "history"} == set(schemas["AskRequest"]["properties"])
    refs = {part.split('"')[0] for part in response.text.split('"$ref":"')[1:]}
    assert refs and all(ref.removeprefix("#/components/schemas/") in schemas for ref in refs)


def test_an_unknown_path_is_a_json_404(url):
    response = httpx.get(f"{url}/v1/nothing")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_an_openai_compatible_model_streams_through_the_server():
    """The served model is a real streaming client talking to a local OpenAI-compatible service."""
    from docpilot.models.openai import OpenAIModel
    from tests.support.openai_server import OpenAIScript, Reply, serve_openai

    script = OpenAIScript(default=Reply(answer="Install it with pip [1].", reasoning="Source 1 covers it.", pieces=3))
    with serve_openai(script) as api:
        with _serve(OpenAIModel(base_url=api, model="scripted")) as base:
            events = _events(_ask(base, headers={}).text)
    names = _names(events)
    assert names[0] == "retrieval" and "thought" in names and names.index("thought") < names.index("token")
    tokens = "".join(data["text"] for name, data in events if name == "token")
    assert tokens == "Install it with pip [1]."
    assert names[-2:] == ["timing", "done"]


# Regression: a model turn that llama.cpp's server cut short ([DONE], no finish_reason) went
# out to clients as a finished answer.
def test_a_model_turn_ended_without_finish_reason_is_an_error_event_naming_the_fix():
    from docpilot.models.openai import OpenAIModel
    from tests.support.openai_server import OpenAIScript, Reply, serve_openai

    script = OpenAIScript(default=Reply(answer="Install it with pip [1].", interrupt_after_words=3))
    with serve_openai(script) as api:
        with _serve(OpenAIModel(base_url=api, model="scripted", retries=0)) as base:
            events = _events(_ask(base, headers={}).text)
    names = _names(events)
    assert "citations" not in names and "refusal" not in names  # the painted words end in an error, no answer
    error = next(data for name, data in events if name == "error")
    assert error["code"] == "model_unfinished" and "--interrupt_requests False" in error["message"]


def test_the_done_event_says_how_the_model_turn_ended_and_what_it_used():
    from docpilot.models.openai import OpenAIModel
    from tests.support.openai_server import OpenAIScript, Reply, serve_openai

    script = OpenAIScript(default=Reply(answer="Install it with pip [1].", finish_reason="length"))
    with serve_openai(script) as api:
        with _serve(OpenAIModel(base_url=api, model="scripted")) as base:
            events = _events(_ask(base, headers={}).text)
    done = next(data for name, data in events if name == "done")
    assert done["finish_reason"] == "length" and done["truncated"] is True
    assert done["usage"]["completion_tokens"] == 5 and done["usage"]["prompt_tokens"] > 0
