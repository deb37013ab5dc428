"""Latency metrics: nearest-rank percentiles and which turns each one reads."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from docpilot.metrics.latency import percentile
from docpilot.metrics.summary import replayed_counts, summarize


def test_percentile_matches_numpy_inverted_cdf() -> None:
    rng = random.Random(11)
    checked = 0
    for _ in range(400):
        values = [rng.uniform(1, 5000) for _ in range(rng.randint(1, 250))]
        n = len(values)
        for p in (1, 7, 25, 50, 90, 95, 99, 100):
            expected = np.percentile(values, p, method="inverted_cdf")
            exact_rank = -(-p * n // 100)
            if math.ceil(n * (p / 100)) != exact_rank:
                # numpy forms the rank in floating point (0.07 · 100 = 7.000000000000001
                # → rank 8); the definition, and this implementation, give rank 7.
                assert percentile(values, p) == sorted(values)[exact_rank - 1]
                continue
            assert percentile(values, p) == expected
            checked += 1
    assert checked > 3000


def test_percentile_by_hand() -> None:
    values = [40.0, 10.0, 30.0, 20.0]
    assert percentile(values, 50) == 20.0  # ceil(2) = 2nd smallest
    assert percentile(values, 95) == 40.0
    assert percentile(values, 0) == 10.0
    assert percentile(list(range(1, 101)), 7) == 7  # exact rank, no float drift
    assert percentile([], 50) is None


def test_p99_under_100_records_is_the_slowest(make_row) -> None:
    rows = [make_row(f"r{i}", gold=["a#"], latency_ms=float(i)) for i in range(1, 61)]
    summary, counts = summarize(rows)
    assert summary["latency_p99"] == 60.0
    assert summary["latency_p95"] == 57.0  # ceil(0.95 · 60) = 57
    assert summary["latency_p50"] == 30.0
    assert counts["latency_p50"] == 60


def test_first_token_reads_turns_that_painted_answer_text(make_row) -> None:
    rows = [
        make_row("streamed", gold=["a#"], answer="x", latency_ms=900.0, first_token_ms=100.0),
        make_row("whole", gold=["a#"], answer="x", latency_ms=700.0),  # never streamed
        make_row("gate", gold=["a#"], refused=True, refused_by="gate", latency_ms=5.0),
        make_row("model-refused", gold=["a#"], answer="REFUSE: not-answerable",
                 refused=True, refused_by="model", latency_ms=50.0, first_token_ms=40.0),
        make_row("errored", gold=["a#"], error="timeout", latency_ms=30000.0),
        make_row("untimed", gold=["a#"], answer="x"),
    ]
    summary, counts = summarize(rows)
    assert counts["first_token_p50"] == 2
    assert summary["first_token_p50"] == 100.0
    assert summary["first_token_p95"] == 700.0
    # Latency reads every timed row, errors and gate refusals included.
    assert counts["latency_p99"] == 5
    assert summary["latency_p99"] == 30000.0
    assert summary["latency_p50"] == 700.0


def test_stage_percentiles_appear_for_every_stage_present(make_row) -> None:
    rows = [
        make_row("r1", gold=["a#"], stages_ms={"embed": 4.0, "model": 800.0}),
        make_row("r2", gold=["a#"], stages_ms={"embed": 6.0, "retrieve": 9.0, "model": 600.0}),
        make_row("r3", gold=["a#"]),
    ]
    summary, counts = summarize(rows)
    stage_keys = [k for k in summary if k.startswith("stage_")]
    assert stage_keys == [
        "stage_embed_p50", "stage_embed_p95", "stage_model_p50", "stage_model_p95",
        "stage_retrieve_p50", "stage_retrieve_p95",
    ]
    assert summary["stage_embed_p50"] == 4.0
    assert summary["stage_model_p95"] == 800.0
    assert (summary["stage_retrieve_p95"], counts["stage_retrieve_p95"]) == (9.0, 1)


@pytest.mark.parametrize(
    "name", ["latency_p50", "latency_p95", "latency_p99", "first_token_p50", "first_token_p95"]
)
def test_latency_is_none_without_times(make_row, name: str) -> None:
    summary, counts = summarize([make_row(gold=["a#"], answer="x")])
    assert summary[name] is None
    assert counts[name] == 0


def test_percentiles_say_how_many_of_their_turns_came_from_the_cache(make_row) -> None:
    rows = [
        make_row("fresh", answer="a", latency_ms=10.0, stages_ms={"retrieve": 1.0, "model": 9.0},
                 cached=["retrieve"]),
        make_row("replayed", answer="b", latency_ms=20.0, stages_ms={"retrieve": 1.0, "model": 19.0},
                 cached=["retrieve", "model"]),
        make_row("gated", refused=True, refused_by="gate", latency_ms=1.0, stages_ms={"retrieve": 1.0},
                 cached=["retrieve"]),
    ]
    counts = replayed_counts(rows)
    assert counts["latency_p50"] == 2  # the replayed answer and the gate refusal with a cached ranking
    assert counts["first_token_p50"] == 1
    assert counts["stage_model_p95"] == 1
    assert "recall@8" not in counts
    assert set(replayed_counts([])) == {"latency_p50", "latency_p95", "latency_p99", "first_token_p50", "first_token_p95"}
