"""A BERT sentence encoder in numpy: all-MiniLM-L6-v2 without torch.

Sentence-transformers models such as all-MiniLM-L6-v2 are a BERT encoder followed by
mean pooling and L2 normalisation. The forward pass is a handful of matrix products
per layer, so numpy runs it from the model's own files (``config.json``,
``vocab.txt``, ``model.safetensors``) with nothing else installed:

    x  = LayerNorm(word[id] + position[i] + token_type[0])
    per layer:
        a = softmax(Q·Kᵀ / √d_head + mask) · V          12 heads, padding masked out
        x = LayerNorm(x + a·W_o + b_o)
        x = LayerNorm(x + GELU(x·W_1 + b_1)·W_2 + b_2)  exact GELU: x·(1 + erf(x/√2))/2
    vector = mean of x over the text's tokens (padding left out), scaled to unit length

Texts are cut to the model's ``max_seq_length`` tokens ([CLS] and [SEP] included),
as sentence-transformers cuts them, and batched by length so short texts are not
padded to long ones. The safetensors file is read by its documented layout (an
8-byte little-endian header length, a JSON header, then raw little-endian tensors),
memory-mapped, so loading costs no copy beyond the transposed weights.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from docpilot.retrieval.wordpiece import WordPiece

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
_MASKED = -1e9  # added to padded positions' attention logits: exp() of it is exactly 0 in float32


class ModelFileError(ValueError):
    """A model file is missing, unreadable or not what a BERT encoder needs."""


MODEL_FILES = ("config.json", "sentence_bert_config.json", "vocab.txt", "model.safetensors")
"""The files of a model folder ``BertEncoder`` reads; the vectors depend on each of them."""


def model_digest(folder: Path) -> str:
    """sha256 over the model files ``BertEncoder`` reads from ``folder`` (an absent optional one counts as absent).

    Hashing the 90 MB of all-MiniLM-L6-v2's weights takes about 0.1 s, so it is done once
    per process and file version: kept by each file's path, size and modification time.
    """
    digest = hashlib.sha256()
    for name in MODEL_FILES:
        path = folder / name
        try:
            stat = path.stat()
        except FileNotFoundError:
            digest.update(f"{name}\x00absent\x01".encode())
            continue
        except OSError as exc:
            raise ModelFileError(f"cannot read {path}: {exc}") from None
        digest.update(f"{name}\x00{_file_digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)}\x01".encode())
    return digest.hexdigest()


@functools.cache
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime_ns are the cache key: a file rewritten in place is hashed again.
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc}") from None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, as read-only arrays over a memory map."""
    try:
        with path.open("rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"cannot read {path}: {exc}") from None
    if len(mapped) < 8:
        raise ModelFileError(f"{path} is too short to be a safetensors file")
    (length,) = struct.unpack("<Q", mapped[:8])
    try:
        header = json.loads(mapped[8 : 8 + length])
    except ValueError as exc:
        raise ModelFileError(f"{path} has no readable safetensors header: {exc}") from None
    start = 8 + length
    tensors: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _DTYPES.get(entry.get("dtype"))
            begin, end = (int(n) for n in entry["data_offsets"])
            shape = tuple(int(n) for n in entry["shape"])
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ModelFileError(f"{path}: tensor {name} has no dtype, shape and data offsets; the file is damaged") from None
        if dtype is None:
            raise ModelFileError(f"{path}: tensor {name} has dtype {entry.get('dtype')!r}, not one of {sorted(_DTYPES)}")
        if end - begin != math.prod(shape) * np.dtype(dtype).itemsize or begin < 0 or start + end > len(mapped):
            raise ModelFileError(f"{path}: tensor {name} does not fit its offsets; the file is damaged")
        tensors[name] = np.frombuffer(mapped, dtype=dtype, count=math.prod(shape), offset=start + begin).reshape(shape)
    return tensors


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

    def encode(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """One unit-length float32 row per text."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [self.token_ids(text) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            out[batch] = self._pooled([ids[i] for i in batch])
        return out

    def _pooled(self, rows: list[list[int]]) -> np.ndarray:
        width = max(len(r) for r in rows)
        tokens = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.float32)
        for i, row in enumerate(rows):
            tokens[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        x = self._word[tokens] + self._position[:width] + self._token_type
        x = self._norm(x.reshape(-1, self.dim), self._embedding_norm).reshape(len(rows), width, self.dim)
        bias = ((1.0 - mask) * _MASKED)[:, None, None, :]
        for layer in self._layers:
            x = self._block(x, bias, layer)
        pooled = (x * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _block(self, x: np.ndarray, bias: np.ndarray, layer: _Layer) -> np.ndarray:
        from scipy.special import erf

        batch, width, hidden = x.shape
        size = hidden // self.heads
        qkv = (x.reshape(-1, hidden) @ layer.qkv + layer.qkv_bias).reshape(batch, width, 3, self.heads, size)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # (batch, heads, width, size)
        logits = q @ k.transpose(0, 1, 3, 2)  # the query weights carry 1/√size already
        logits += bias
        logits -= logits.max(axis=-1, keepdims=True)
        weights = np.exp(logits, out=logits)
        weights /= weights.sum(axis=-1, keepdims=True)
        context = (weights @ v).transpose(0, 2, 1, 3).reshape(-1, hidden)
        x = self._norm(x.reshape(-1, hidden) + context @ layer.out + layer.out_bias, layer.norm1)
        up = x @ layer.up
        up += layer.up_bias
        gate = erf(up * np.float32(1 / math.sqrt(2)))
        gate += np.float32(1.0)
        gate *= np.float32(0.5)
        up *= gate
        x = self._norm(x + up @ layer.down + layer.down_bias, layer.norm2)
        return x.reshape(batch, width, hidden)

    def _norm(self, x: np.ndarray, params: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Layer normalisation of each row of a 2-D array, in place."""
        weight, bias = params
        x -= x.mean(axis=-1, keepdims=True)
        variance = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[-1])
        x /= np.sqrt(variance + np.float32(self.eps))
        x *= weight
        x += bias
        return x
