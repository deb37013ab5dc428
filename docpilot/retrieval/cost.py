"""What a first index build costs: the tokens an embedder reads and the time that takes on this machine.

A build with ``minilm`` runs the model over every chunk once, so its time follows the
work of the forward pass: ``forward_flops`` of the chunks' token counts. A sample of the
chunks embedded here gives this machine's speed in operations a second, and the whole
corpus's work divided by it the projected first build. Kept apart from the embedders'
modules, whose code is part of every saved index's fingerprint.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

import numpy as np

from docpilot.retrieval.embedders import MiniLMEmbedder


def forward_flops(lengths: Sequence[int], *, hidden: int = 384, inner: int = 1536, layers: int = 6) -> float:
    """The floating-point operations of a forward pass over texts of these token counts (all-MiniLM-L6-v2's shape).

    A multiply-add counts as two. Per layer and token: the query, key, value and output
    projections 4 · 2·hidden² and the feed-forward 2 · 2·hidden·inner; attention adds
    2 · 2·hidden·L for a text of L tokens (its scores and their product with the values).
    """
    found = np.asarray(lengths, dtype=np.float64)
    per_layer = 2 * (4 * hidden * hidden + 2 * hidden * inner) * found.sum() + 4 * hidden * (found**2).sum()
    return layers * float(per_layer)


def token_counts(embedder: MiniLMEmbedder, texts: Sequence[str]) -> list[int]:
    """How many tokens MiniLM reads of each text ([CLS] and [SEP] included, cut as it embeds them)."""
    encoder = embedder._load()  # the model's own tokenizer, loaded once for the embedder
    return [len(encoder.token_ids(text)) for text in texts]


def projected_build_s(embedder: MiniLMEmbedder, texts: Sequence[str], *, sample: int = 48, seed: int = 0) -> dict:
    """The corpus's tokens and the seconds a first MiniLM build of ``texts`` would take here.

    A seeded sample of ``sample`` texts is embedded (after a short warm-up) and timed; the
    build is projected by the forward pass's work, so long chunks count for what they cost.
    """
    lengths = token_counts(embedder, texts)
    picked = sorted(random.Random(seed).sample(range(len(texts)), min(sample, len(texts))))
    chosen = [texts[i] for i in picked]
    embedder.embed(chosen[:4])  # first touch of the weights and threads, outside the timing
    started = time.perf_counter()
    embedder.embed(chosen)
    seconds = time.perf_counter() - started
    speed = forward_flops([lengths[i] for i in picked]) / max(seconds, 1e-9)
    return {
        "tokens": int(sum(lengths)),
        "seconds": round(forward_flops(lengths) / speed, 1),
        "sample": len(chosen),
        "gflops": round(speed / 1e9, 1),
    }
