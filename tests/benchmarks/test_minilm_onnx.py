"""The ONNX Runtime benchmark: its graph gives the numpy pass's vectors, or it names what to install."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from benchmarks import minilm_onnx

pytestmark = pytest.mark.slow

HAS_RUNTIME = all(importlib.util.find_spec(name) for name in ("onnx", "onnxruntime"))


@pytest.mark.skipif(HAS_RUNTIME, reason="onnx and onnxruntime are installed here")
def test_without_onnx_runtime_the_benchmark_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["minilm_onnx", "--docs", str(tmp_path)])
    with pytest.raises(SystemExit) as stopped:
        minilm_onnx.main()
    assert "pip install onnx onnxruntime" in str(stopped.value)


@pytest.mark.skipif(not HAS_RUNTIME, reason="onnx and onnxruntime are not DocPilot's dependencies")
def test_the_onnx_graph_embeds_as_the_numpy_pass_does(tmp_path):
    from docpilot.retrieval.bert import BertEncoder
    from docpilot.retrieval.embedders import _installed_minilm_folder

    folder = _installed_minilm_folder()
    if folder is None:
        pytest.skip("the minilm extra is not installed")
    encoder = BertEncoder(folder)
    texts = ["How do I retry a task?", "Schedules run deployments " * 40, "x"]
    minilm_onnx.onnx_graph(folder, tmp_path / "minilm.onnx")
    ids = [encoder.token_ids(t) for t in texts]
    vectors = minilm_onnx.onnx_encode(minilm_onnx.session(tmp_path / "minilm.onnx", 1), ids, encoder.dim)
    assert np.einsum("ij,ij->i", vectors, encoder.encode(texts)).min() > 1 - 1e-5
