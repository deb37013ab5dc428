"""A BERT sentence encoder in numpy: all-MiniLM-L6-v2 without torch.

Sentence-transformers models such as all-MiniLM-L6-v2 are a BERT encoder followed by
mean pooling and L2 normalisation. The forward pass is a handful of matrix products
per layer, so numpy runs it from the model's own files (``config.json``,
``vocab.txt``, ``model.safetensors``) with nothing else installed:

    x  = LayerNorm(word[id] + position[i] + token_type[0])
    per layer:
        a = softmax(Q·Kᵀ / √d_head) · V                 12 heads, each text on its own
        x = LayerNorm(x + a·W_o + b_o)
        x = LayerNorm(x + GELU(x·W_1 + b_1)·W_2 + b_2)  exact GELU: x·(1 + erf(x/√2))/2
    vector = mean of x over the text's tokens, scaled to unit length

Texts are cut to the model's ``max_seq_length`` tokens ([CLS] and [SEP] included),
as sentence-transformers cuts them. Nine tenths of the work is the six products with
weight matrices, and a token's row in them depends on no other token, so a batch is
*packed*: the tokens of all its texts one after another, no padding; only attention
reads a text's tokens together, texts of one length in one call. Batches run a core
each. The safetensors file is read by its documented layout (an 8-byte
little-endian header length, a JSON header, then raw little-endian tensors),
memory-mapped, so loading costs no copy beyond the transposed weights.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from docpilot.retrieval.model_files import MODEL_FILES, ModelFileError, model_digest, read_safetensors  # noqa: F401
from docpilot.retrieval.wordpiece import WordPiece

BATCH_TOKENS = 2048
"""Most tokens in one batch: sizes around it run alike, and a smaller one leaves more batches to share out."""
_FEED_ROWS = 256  # tokens per block of the feed-forward: 256 × 1536 floats is 1.5 MB
_LEAST_TOKENS = 256  # the smallest batch the last of a call's work is cut into
_GELU_ROWS = 64  # GELU's two dozen passes and their temporaries fit a core's 1 MB L2 at 64 rows
_ATTENTION_FLOATS = 1 << 18  # attention scores per call: 1 MB, so the softmax runs in cache

# GELU(x) = x·Φ(x) = max(x, 0) − |x|·erfc(|x|/√2)/2, and erfc(|x|/√2) is written
# t·P(t)·exp(−x²/2) with t = 1/(1 + 0.33|x|). P's coefficients (halved, lowest first) were
# fitted here by least squares, reweighted toward the largest error, to scipy's erfcx over
# |x| ≤ 12; GELU computed so in float32 is within 8e-7 of the exact one (relative), the
# size of float32 rounding, and cheaper to compute than scipy.special.erf.
_ERFC_T = np.float32(0.33)
_ERFC_HALF = tuple(np.float32(c) for c in (
    0.13289493322372437, 0.11710762232542038, 0.1892128735780716, -0.10439209640026093,
    0.34675854444503784, -0.22902099788188934, 0.04743922874331474,
))


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (hidden, 3·hidden): query, key and value projections side by side
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


class BertEncoder:
    """Mean-pooled, normalised sentence vectors from a BERT model folder, computed with numpy."""

    def __init__(self, folder: Path, *, max_tokens: int | None = None) -> None:
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            vocabulary = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
            sentence = folder / "sentence_bert_config.json"
            limit = json.loads(sentence.read_text(encoding="utf-8"))["max_seq_length"] if sentence.exists() else 512
            self.dim = int(config["hidden_size"])
            self.heads = int(config["num_attention_heads"])
            self.eps = float(config["layer_norm_eps"])
            layers = int(config["num_hidden_layers"])
            self.max_tokens = int(max_tokens or min(limit, config["max_position_embeddings"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelFileError(f"cannot read the model in {folder}: {exc!r}") from None
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ModelFileError(f"{folder / 'config.json'} describes a model this encoder does not run")
        self.tokenizer = WordPiece(vocabulary)
        ids = {token: i for i, token in enumerate(vocabulary)}
        try:
            self._cls, self._sep = ids["[CLS]"], ids["[SEP]"]
        except KeyError as exc:
            raise ModelFileError(f"{folder / 'vocab.txt'} has no {exc.args[0]} token") from None
        weights = read_safetensors(folder / "model.safetensors")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        try:
            self._load(weights, prefix, layers)
        except KeyError as exc:
            raise ModelFileError(f"{folder / 'model.safetensors'} has no tensor {exc.args[0]}") from None

    def _load(self, w: dict[str, np.ndarray], prefix: str, layers: int) -> None:
        def get(name: str) -> np.ndarray:
            return np.asarray(w[prefix + name], dtype=np.float32)

        def linear(name: str) -> tuple[np.ndarray, np.ndarray]:
            # Stored (out, in) as torch keeps them; x @ W needs (in, out), contiguous for BLAS.
            return np.ascontiguousarray(get(name + ".weight").T), get(name + ".bias")

        def norm(name: str) -> tuple[np.ndarray, np.ndarray]:
            return get(name + ".weight"), get(name + ".bias")

        self._word = get("embeddings.word_embeddings.weight")
        self._position = get("embeddings.position_embeddings.weight")
        self._token_type = get("embeddings.token_type_embeddings.weight")[0]
        self._embedding_norm = norm("embeddings.LayerNorm")
        self._layers = []
        for n in range(layers):
            base = f"encoder.layer.{n}."
            parts = [linear(base + f"attention.self.{p}") for p in ("query", "key", "value")]
            # Scaling the query by 1/√size here saves a pass over every attention matrix.
            scale = np.float32(1 / math.sqrt(self.dim // self.heads))
            parts[0] = (parts[0][0] * scale, parts[0][1] * scale)
            out, out_bias = linear(base + "attention.output.dense")
            up, up_bias = linear(base + "intermediate.dense")
            down, down_bias = linear(base + "output.dense")
            self._layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(np.concatenate([p[0] for p in parts], axis=1)),
                    qkv_bias=np.concatenate([p[1] for p in parts]),
                    out=out,
                    out_bias=out_bias,
                    norm1=norm(base + "attention.output.LayerNorm"),
                    up=up,
                    up_bias=up_bias,
                    down=down,
                    down_bias=down_bias,
                    norm2=norm(base + "output.LayerNorm"),
                )
            )

    def token_ids(self, text: str) -> list[int]:
        """The text's ids as the model reads them: [CLS], at most max_tokens − 2 pieces, [SEP]."""
        return [self._cls, *self.tokenizer.ids(text, self.max_tokens - 2), self._sep]

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, workers: int | None = None) -> np.ndarray:
        """One unit-length float32 row per text.

        Texts are sorted by length, longest first, and cut into batches of at most
        ``batch_size`` texts and ``BATCH_TOKENS`` tokens. ``workers`` batches run at once,
        one core each (default: the cores this process may use); a lone batch, such as
        one question, runs on all of them.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # A text that comes twice (the same boilerplate section on two pages) runs once.
        slots: dict[str, int] = {}
        where = [slots.setdefault(text, len(slots)) for text in texts]
        if len(slots) < len(texts):
            return self.encode(list(slots), batch_size=batch_size, workers=workers)[where]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        ids = [self.token_ids(text) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        workers = workers or _cores()
        batches = list(_batches(order, [len(r) for r in ids], batch_size, workers))
        workers = min(len(batches), workers)

        def run(batch: list[int]) -> None:
            out[batch] = self._pooled([ids[i] for i in batch])

        if workers <= 1:
            for batch in batches:
                run(batch)
        else:
            # A batch per core, each with a one-thread BLAS: the cores never wait on each
            # other inside a product, which on a busy machine costs more than it shares.
            with _one_blas_thread(), ThreadPoolExecutor(workers, thread_name_prefix="minilm") as pool:
                for _ in pool.map(run, batches):
                    pass
        return out

    def _pooled(self, rows: list[list[int]]) -> np.ndarray:
        """The vectors of texts (sorted by length, so equal lengths are neighbours), run packed: a row per token."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        tokens = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(lengths.sum()))
        positions = np.arange(len(tokens)) - np.repeat(starts, lengths)
        x = self._word[tokens]
        x += self._position[positions]
        x += self._token_type
        x = self._norm(x, self._embedding_norm)
        # Texts of one length share an attention call; a call's scores stay about 1 MB.
        groups = []
        for length, members in itertools.groupby(range(len(rows)), key=lambda i: int(lengths[i])):
            members = list(members)
            step = max(1, _ATTENTION_FLOATS // (self.heads * length * length))
            for first in range(0, len(members), step):
                count = min(step, len(members) - first)
                begin = int(starts[members[first]])
                groups.append((begin, begin + count * length, count, length))
        for layer in self._layers:
            x = self._block(x, groups, layer)
        pooled = np.add.reduceat(x, starts, axis=0)
        pooled /= lengths[:, None].astype(np.float32)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))

    def _block(self, x: np.ndarray, groups: list[tuple[int, int, int, int]], layer: _Layer) -> np.ndarray:
        """One encoder layer over packed tokens; ``groups`` are (begin, end, texts, length) of equal-length runs."""
        hidden, heads = self.dim, self.heads
        size = hidden // heads
        qkv = x @ layer.qkv
        qkv += layer.qkv_bias
        context = np.empty_like(x)
        for begin, end, count, length in groups:
            part = qkv[begin:end].reshape(count, length, 3, heads, size)
            query = part[:, :, 0].transpose(0, 2, 1, 3)  # (texts, heads, length, size), a view
            key = part[:, :, 1].transpose(0, 2, 3, 1)  # already transposed for query · keyᵀ
            # The values with a column of ones: one product gives the weighted sum and the
            # softmax's denominator, saving a pass over the (length × length) scores.
            value = np.empty((count, heads, length, size + 1), dtype=np.float32)
            value[..., :size] = part[:, :, 2].transpose(0, 2, 1, 3)
            value[..., size] = 1.0
            scores = np.matmul(query, key)  # the query weights carry 1/√size already
            with np.errstate(over="ignore", invalid="ignore"):
                mixed = np.matmul(np.exp(scores, out=scores), value)
            total = mixed[..., size:]
            if not (np.isfinite(total).all() and total.min() > 0):
                # exp() overflowed or every weight of a row underflowed: shift each row by
                # its largest score first. The model's scores need it rarely, if ever.
                scores = np.matmul(query, key)
                scores -= scores.max(axis=-1, keepdims=True)
                mixed = np.matmul(np.exp(scores, out=scores), value)
                total = mixed[..., size:]
            into = context[begin:end].reshape(count, length, heads, size).transpose(0, 2, 1, 3)
            np.divide(mixed[..., :size], total, out=into)
        attended = context @ layer.out
        attended += layer.out_bias
        attended += x
        x = self._norm(attended, layer.norm1)
        for begin in range(0, len(x), _FEED_ROWS):
            # In row blocks, so the 1536-wide activations stay in the core's cache for GELU.
            rows = x[begin : begin + _FEED_ROWS]
            up = rows @ layer.up
            up += layer.up_bias
            for part in range(0, len(up), _GELU_ROWS):
                _gelu(up[part : part + _GELU_ROWS])
            down = up @ layer.down
            down += layer.down_bias
            rows += down
        return self._norm(x, layer.norm2)

    def _norm(self, x: np.ndarray, params: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Layer normalisation of each row of a 2-D array, in place."""
        weight, bias = params
        x -= x.mean(axis=-1, keepdims=True)
        variance = np.einsum("ij,ij->i", x, x)[:, None]
        variance /= np.float32(x.shape[-1])
        variance += np.float32(self.eps)
        np.sqrt(variance, out=variance)
        x /= variance
        x *= weight
        x += bias
        return x


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU of a float32 array, in place, to float32 precision (see ``_ERFC_HALF``)."""
    size = np.abs(x)
    # exp(−x²/2) falls below float32's normal range past |x| = 13.2, and subnormal floats
    # slow every product they enter several times over; past 12.6 the tail is below
    # 1e-33 and GELU is max(x, 0) to the last bit, so |x| is capped there.
    np.minimum(size, np.float32(12.6), out=size)
    t = size * _ERFC_T
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    tail = t * _ERFC_HALF[-1]
    for coefficient in _ERFC_HALF[-2::-1]:
        tail += coefficient
        tail *= t
    tail *= size
    np.multiply(size, size, out=size)
    size *= np.float32(-0.5)
    np.exp(size, out=size)
    tail *= size
    np.maximum(x, np.float32(0.0), out=x)
    x -= tail
    return x


def _batches(order: list[int], lengths: list[int], most: int, workers: int) -> Iterator[list[int]]:
    """Runs of ``order`` (indices sorted longest first) of at most ``most`` texts and ``BATCH_TOKENS`` tokens.

    With several workers the batches shrink toward the end, down to ``_LEAST_TOKENS``:
    the cores then finish together instead of one waiting out the other's last batch.
    """
    left = sum(lengths[i] for i in order)
    batch: list[int] = []
    tokens = limit = 0
    for index in order:
        if batch and (len(batch) >= most or tokens + lengths[index] > limit):
            yield batch
            batch, tokens = [], 0
        if not batch:
            limit = BATCH_TOKENS if workers <= 1 else min(BATCH_TOKENS, max(_LEAST_TOKENS, left // (2 * workers)))
        batch.append(index)
        tokens += lengths[index]
        left -= lengths[index]
    if batch:
        yield batch


def _cores() -> int:
    """How many cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_blas_lock = threading.Lock()
_blas_users = 0
_blas_limit = None


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread while any encoder runs batches side by side (the setting is process-wide)."""
    global _blas_users, _blas_limit
    from threadpoolctl import threadpool_limits

    with _blas_lock:
        if _blas_users == 0:
            _blas_limit = threadpool_limits(1, user_api="blas")
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0 and _blas_limit is not None:
                _blas_limit.restore_original_limits()
                _blas_limit = None
