"""Searches off the answer loop: a real server whose retriever embeds questions at a real, slow endpoint on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from docpilot.assistant.workspace import Workspace
from docpilot.config.model import RetrievalConfig
from docpilot.models.base import Prompt
from docpilot.retrieval.embedders import OpenAIEmbedder, StaticEmbedder
from docpilot.retrieval.rankers import Retriever
from docpilot.server.app import create_app, serve_in_thread
from docpilot.server.searching import search_threads
from tests.docpilot.retrieval.test_embedders import WordHashEmbedder
from tests.docpilot.server.test_server import _config, _workspace

STALL_S = 1.5
"""How long the embedding endpoint takes over a text that asks it to stall."""
STALLING = "How do I roll back a stalling release?"
LONG = "How do I install Acme?"
OTHER = "How do I upgrade Acme?"


@contextmanager
def embedding_endpoint() -> Iterator[tuple[str, list[str]]]:
    """An OpenAI-compatible ``POST /v1/embeddings``: prompt, except over a text with "stalling", which takes ``STALL_S``."""
    seen: list[str] = []
    words = WordHashEmbedder()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
            seen.extend(texts)
            if any("stalling" in text for text in texts):
                time.sleep(STALL_S)  # a service that is slow to answer, as one under load is
            vectors = words.embed(texts)
            data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
            body = json.dumps({"object": "list", "data": data, "model": "word-hash"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class PacedModel:
    """Streams the long question's answer a word every 30 ms for 3 s; answers any other question at once."""

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        if prompt.question != LONG:
            yield "Upgrade with pip [1]."
            return
        for _ in range(100):
            await asyncio.sleep(0.03)
            yield "word "
        yield "[1]."

    async def complete(self, prompt: Prompt):  # pragma: no cover - the server streams
        raise NotImplementedError


def _served_workspace(base_url: str) -> Workspace:
    corpus = _workspace().corpus
    settings = RetrievalConfig(retriever="hybrid")
    embedder = OpenAIEmbedder(base_url=base_url, model="word-hash", retries=0, timeout_s=30)
    return Workspace(
        config=_config(retrieval=settings.model_dump()),
        corpus=corpus,
        _retriever=Retriever(corpus, settings, embedder=embedder),
        chunks={c.id: c for c in corpus.chunks},
        cache=None,
    )


def _stream_times(url: str, question: str, times: list[float], started: threading.Event | None = None) -> None:
    """Ask ``question`` as a stream; append when each event arrives (perf_counter)."""
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{url}/v1/ask", json={"question": question}) as response:
            for line in response.iter_lines():
                if line.startswith("event: "):
                    times.append(time.perf_counter())
                    if started is not None and len(times) >= 5:
                        started.set()


# Regression: the search ran on the answer loop, so one question waiting on its embedding
# stopped every other live stream of the worker for as long as the service took.
@pytest.mark.slow  # takes seconds
def test_a_stalled_embedding_does_not_stall_another_live_stream():
    with embedding_endpoint() as (base_url, seen):
        with serve_in_thread(create_app(_served_workspace(base_url), PacedModel(), token=None)) as url:
            long_times: list[float] = []
            streaming = threading.Event()
            long = threading.Thread(target=_stream_times, args=(url, LONG, long_times, streaming))
            long.start()
            assert streaming.wait(30)  # the long answer is streaming
            stalled_times: list[float] = []
            asked = time.perf_counter()
            stalled = threading.Thread(target=_stream_times, args=(url, STALLING, stalled_times))
            stalled.start()
            stalled.join(30)
            long.join(30)
    assert STALLING in seen  # the second question was embedded at the slow endpoint
    assert stalled_times and stalled_times[0] - asked >= STALL_S  # and its search waited on it
    gaps = [b - a for a, b in zip(long_times, long_times[1:], strict=False)]
    # A word every 30 ms; on the answer loop the stall held them back for 1.5 s.
    assert max(gaps) < 0.5, f"the longest pause between events was {max(gaps):.2f} s"
    during = [t for t in long_times if asked <= t <= asked + STALL_S]
    assert len(during) >= 10  # the long stream overlapped the whole stall


@pytest.mark.slow  # takes seconds
def test_a_question_does_not_wait_for_another_questions_stalled_embedding():
    with embedding_endpoint() as (base_url, _):
        with serve_in_thread(create_app(_served_workspace(base_url), PacedModel(), token=None)) as url:
            stalled_times: list[float] = []
            stalled = threading.Thread(target=_stream_times, args=(url, STALLING, stalled_times))
            stalled.start()
            time.sleep(0.2)  # the stalled question's search is waiting on the endpoint
            asked = time.perf_counter()
            other_times: list[float] = []
            _stream_times(url, OTHER, other_times)
            stalled.join(30)
    # Embedding waits on a service, so each question in flight has a thread to wait on.
    assert other_times[-1] - asked < STALL_S / 2
    assert other_times[-1] < stalled_times[0]  # answered whole while the other still waited


def test_searches_take_no_thread_when_cheap_one_when_they_work_the_cores_and_one_a_question_when_they_wait():
    remote = OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", model="m")
    assert search_threads(remote, 16) == 16
    assert search_threads(WordHashEmbedder(), 16) == 1  # a second thread would share the BLAS threads' cores
    # Regression: BM25's search (0.06 ms) was handed to a thread and back (0.12 to 0.2 ms of CPU a question).
    assert search_threads(StaticEmbedder(), 16) == 0
    assert search_threads(None, 16) == 0  # BM25


def test_a_cheap_search_runs_on_the_answer_loop_and_answers_the_same():
    from docpilot.api.schema import AskRequest
    from docpilot.server.searching import SearchPool

    workspace = _workspace()
    pool = SearchPool(workspace)
    pool.start(16)
    try:
        found = asyncio.run(pool.search(AskRequest(question=LONG)))
    finally:
        pool.stop()
    assert pool.threads == 0  # no thread to hand the search to and back
    assert [h.section_id for h in found.hits] == [h.section_id for h in workspace.retriever.search(LONG, k=8)]


class HeldEmbedder(WordHashEmbedder):
    """Embeds at once, except the question it was told to hold, which waits for a signal."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held, self.inside, self.go = held, threading.Event(), threading.Event()

    def embed(self, texts):
        if list(texts) == [self.held]:
            self.inside.set()
            assert self.go.wait(30)
        return super().embed(texts)


# Regression: a search of the same retriever from outside the pool, while a pool search
# waited on its embedding, let go of a lock it did not hold and failed.
def test_a_search_outside_the_pool_meanwhile_neither_fails_nor_disturbs_the_pools():
    from docpilot.api.schema import AskRequest
    from docpilot.server.searching import SearchPool

    corpus = _workspace().corpus
    settings = RetrievalConfig(retriever="hybrid")
    embedder = HeldEmbedder(LONG)
    workspace = Workspace(config=_config(retrieval=settings.model_dump()), corpus=corpus,
                          _retriever=Retriever(corpus, settings, embedder=embedder),
                          chunks={c.id: c for c in corpus.chunks}, cache=None)  # fmt: skip
    pool = SearchPool(workspace)
    pool.start(1)
    try:
        with ThreadPoolExecutor(1) as caller:
            pooled = caller.submit(asyncio.run, pool.search(AskRequest(question=LONG)))
            assert embedder.inside.wait(30)  # the pool's search waits on its embedding, the lock let go
            # The local runtime's search, on a thread of its own, meets the pool's wrapper.
            direct = workspace.retriever.search(OTHER, k=8)
            embedder.go.set()
            found = pooled.result(30)
    finally:
        pool.stop()
    assert direct and found.hits and workspace.retriever.embedder is embedder
