"""Would ONNX Runtime, in float32 or int8, embed chunks faster than DocPilot's numpy MiniLM?

A first index build's cost is the forward pass (benchmarks/minilm_speed.py). This
builds all-MiniLM-L6-v2 as an ONNX graph from the same weights DocPilot reads (standard
ONNX operators, opset 18: mean pooling and unit length included), lets ONNX Runtime
fuse it, quantizes a copy to int8 the way ONNX Runtime's ``quantize_dynamic``
does (int8 weights, activations quantized per product), and embeds the same seeded
sample of a docs folder's chunks with the three, alternating rounds:

    pip install onnx onnxruntime          # not DocPilot's dependencies
    python -m benchmarks.minilm_onnx --docs ../shared/data/prefect-docs/docs --sample 384

It prints each pass's time, useful GFLOPS (as benchmarks/minilm_speed.py counts them),
its speed against numpy's, and how far its vectors are from numpy's (cosine, least and
mean). It also times one weight product of the feed-forward (2,048 tokens × 384 →
1,536) in float32 and in int8 on one thread, which is where an int8 gain would come
from. ONNX batches are padded to their longest text, sorted by length, at most 2,048
tokens a batch; numpy runs as an index build runs it.
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.minilm_speed import flops
from docpilot.corpus.pages import load_corpus
from docpilot.retrieval.bert import BertEncoder, _cores
from docpilot.retrieval.embedders import _installed_minilm_folder
from docpilot.retrieval.index import dense_text
from docpilot.retrieval.model_files import read_safetensors

BATCH_TOKENS = 2048


def onnx_graph(folder: Path, path: Path) -> None:
    """Write the model in ``folder`` as an ONNX graph: (input_ids, attention_mask) → unit-length mean-pooled vectors."""
    import json

    from onnx import TensorProto, helper, numpy_helper

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    weights = read_safetensors(folder / "model.safetensors")
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    size = hidden // heads
    initializers: list = []
    nodes: list = []

    def constant(name: str, value) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def tensor(name: str) -> np.ndarray:
        return np.asarray(weights[prefix + name], dtype=np.float32)

    def op(kind: str, inputs: list[str], **attributes) -> str:
        out = f"v{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attributes))
        return out

    def linear(x: str, name: str) -> str:
        weight = constant(name + ".w", np.ascontiguousarray(tensor(name + ".weight").T))
        return op("Add", [op("MatMul", [x, weight]), constant(name + ".b", tensor(name + ".bias"))])

    def norm(x: str, name: str) -> str:
        return op("LayerNormalization", [x, constant(name + ".g", tensor(name + ".weight")),
                                         constant(name + ".beta", tensor(name + ".bias"))],
                  axis=-1, epsilon=float(config["layer_norm_eps"]))

    one = constant("one", np.array(1, dtype=np.int64))
    axis1 = constant("axis1", np.array([1], dtype=np.int64))
    length = op("Gather", [op("Shape", ["input_ids"]), one], axis=0)
    positions = op("Range", [constant("zero", np.array(0, dtype=np.int64)), length, one])
    x = op("Add", [op("Gather", [constant("word", tensor("embeddings.word_embeddings.weight")), "input_ids"]),
                   op("Gather", [constant("position", tensor("embeddings.position_embeddings.weight")), positions])])
    x = norm(op("Add", [x, constant("type", tensor("embeddings.token_type_embeddings.weight")[0])]),
             "embeddings.LayerNorm")
    mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    masked = op("Mul", [op("Sub", [constant("onef", np.float32(1)), mask]), constant("neg", np.float32(-1e4))])
    masked = op("Unsqueeze", [masked, constant("axes12", np.array([1, 2], dtype=np.int64))])
    split = constant("split", np.array([0, 0, heads, size], dtype=np.int64))
    joined = constant("joined", np.array([0, 0, hidden], dtype=np.int64))
    root = constant("root", np.float32(math.sqrt(size)))
    for n in range(config["num_hidden_layers"]):
        base = f"encoder.layer.{n}."

        def heads_of(part: str, perm: list[int], x: str = x, base: str = base) -> str:
            return op("Transpose", [op("Reshape", [linear(x, base + "attention.self." + part), split])], perm=perm)

        query, key, value = heads_of("query", [0, 2, 1, 3]), heads_of("key", [0, 2, 3, 1]), heads_of("value", [0, 2, 1, 3])
        scores = op("Add", [op("Div", [op("MatMul", [query, key]), root]), masked])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), value])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), joined])
        x = norm(op("Add", [linear(context, base + "attention.output.dense"), x]), base + "attention.output.LayerNorm")
        up = linear(x, base + "intermediate.dense")
        erf = op("Erf", [op("Div", [up, constant(f"sqrt2.{n}", np.float32(math.sqrt(2)))])])
        gelu = op("Mul", [op("Mul", [up, constant(f"half.{n}", np.float32(0.5))]),
                          op("Add", [erf, constant(f"onef.{n}", np.float32(1))])])
        x = norm(op("Add", [linear(gelu, base + "output.dense"), x]), base + "output.LayerNorm")
    summed = op("ReduceSum", [op("Mul", [x, op("Unsqueeze", [mask, constant("axis2", np.array([2], dtype=np.int64))])]),
                              axis1], keepdims=0)
    pooled = op("Div", [summed, op("ReduceSum", [mask, axis1], keepdims=1)])
    nodes.append(helper.make_node("Div", [pooled, op("ReduceL2", [pooled, axis1], keepdims=1)], ["vector"]))
    _save_graph(nodes, initializers, hidden, path)


def _save_graph(nodes: list, initializers: list, hidden: int, path: Path) -> None:
    """Write the encoder's nodes and weights to ``path`` as a checked opset-18 model: token ids and mask in, vectors out."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["texts", "tokens"]) for name in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("vector", TensorProto.FLOAT, ["texts", hidden])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def session(path: Path, threads: int):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def onnx_encode(sess, ids: list[list[int]], dim: int) -> np.ndarray:
    """Vectors from an ONNX session: texts sorted longest first, padded batches of at most BATCH_TOKENS tokens."""
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    out = np.zeros((len(ids), dim), dtype=np.float32)
    start = 0
    while start < len(order):
        longest = len(ids[order[start]])
        batch = order[start : start + max(1, BATCH_TOKENS // longest)]
        start += len(batch)
        tokens = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros_like(tokens)
        for row, index in enumerate(batch):
            tokens[row, : len(ids[index])] = ids[index]
            mask[row, : len(ids[index])] = 1
        out[batch] = sess.run(None, {"input_ids": tokens, "attention_mask": mask})[0]
    return out


def product_speed(work: Path, *, rows: int = 2048, inner: int = 384, outer: int = 1536, repeats: int = 20) -> dict[str, float]:
    """GFLOPS of one (rows × inner) · (inner × outer) product in ONNX Runtime on one thread, float32 and int8."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    weight = np.random.default_rng(0).standard_normal((inner, outer)).astype(np.float32) / 20
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "product",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", inner])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", outer])],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(work / "product.onnx"))
    quantize_dynamic(str(work / "product.onnx"), str(work / "product-int8.onnx"), weight_type=QuantType.QInt8)
    x = np.random.default_rng(1).standard_normal((rows, inner)).astype(np.float32)
    speeds = {}
    for name in ("product", "product-int8"):
        sess = session(work / f"{name}.onnx", 1)
        sess.run(None, {"x": x})
        best = min(_timed(lambda sess=sess: sess.run(None, {"x": x})) for _ in range(repeats))
        speeds["int8" if name.endswith("int8") else "float32"] = 2 * rows * inner * outer / best / 1e9
    return speeds


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, required=True, help="a docs folder whose chunks are embedded")
    parser.add_argument("--sample", type=int, default=384, help="chunks drawn, seeded")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of the three passes")
    args = parser.parse_args()
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise SystemExit("this benchmark needs onnx and onnxruntime: pip install onnx onnxruntime") from None
    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic's advice to preprocess the graph first
    folder = _installed_minilm_folder()
    if folder is None:
        raise SystemExit("this benchmark needs the minilm weights: make install")
    encoder = BertEncoder(folder)
    corpus = load_corpus(args.docs)
    texts = [dense_text(corpus, chunk) for chunk in corpus.chunks]
    random.Random(0).shuffle(texts)
    texts = texts[: args.sample]
    ids = [encoder.token_ids(text) for text in texts]
    work = flops(np.array([len(r) for r in ids]))
    print(f"{len(texts)} chunks, {sum(map(len, ids))} tokens, {work / 1e9:.0f} GFLOP")
    with tempfile.TemporaryDirectory(prefix="docpilot-onnx-") as tmp:
        tmp_path = Path(tmp)
        onnx_graph(folder, tmp_path / "minilm.onnx")
        quantize_dynamic(str(tmp_path / "minilm.onnx"), str(tmp_path / "minilm-int8.onnx"), weight_type=QuantType.QInt8)
        threads = _cores()
        passes = {"numpy": lambda: encoder.encode(texts)}
        for name in ("minilm", "minilm-int8"):
            sess = session(tmp_path / f"{name}.onnx", threads)
            passes["onnx float32" if name == "minilm" else "onnx int8"] = lambda sess=sess: onnx_encode(sess, ids, encoder.dim)
        vectors = {name: run() for name, run in passes.items()}  # a first pass each warms caches and threads
        times: dict[str, list[float]] = {name: [] for name in passes}
        for _ in range(args.rounds):
            for name, run in passes.items():
                times[name].append(_timed(run))
        products = product_speed(tmp_path)
    numpy_time = statistics.median(times["numpy"])
    for name, spent in times.items():
        seconds = statistics.median(spent)
        cosine = (vectors[name] * vectors["numpy"]).sum(axis=1)
        print(f"{name:<13} {seconds:6.1f} s  {work / seconds / 1e9:5.1f} GFLOPS  ×{numpy_time / seconds:.2f} of numpy  "
              f"cosine to numpy: least {cosine.min():.6f}, mean {cosine.mean():.6f}")
    print(f"one feed-forward product, one thread: float32 {products['float32']:.1f} GFLOPS, "
          f"int8 {products['int8']:.1f} GFLOPS (×{products['int8'] / products['float32']:.2f})")


if __name__ == "__main__":
    main()
