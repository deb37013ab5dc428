"""The variants benchmark (benchmarks/variants.py) at a tiny size: it runs, and the targets that are counts hold.

The wall-time ratio is the benchmark's to measure on a quiet machine; here it is only reported.
"""

from __future__ import annotations

import pytest

from benchmarks import variants

pytestmark = pytest.mark.slow


def test_the_benchmark_counts_shared_retrieval_and_model_calls():
    figures = variants.measure(records=6, latency_s=0.02, concurrency=2, repeat=1)
    assert figures["retrieval_runs"] == 1 and figures["rankings_computed"] == 6
    assert figures["rerun_model_calls"] == 0
    assert figures["added_variant_model_calls"] == 6
    assert figures["added_variant_model_computed"] == {"m1": 0, "m2": 0, "m3": 0, "m1-long": 6}
    assert figures["ratio"] > 0
