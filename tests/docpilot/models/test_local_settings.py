"""The local provider's settings and cache identity, which need no model server (docpilot/models/local.py)."""

from __future__ import annotations

import pytest

from docpilot.config.model import ModelConfig
from docpilot.errors import ConfigError
from docpilot.models.local import file_identity, model_file, server_command
from docpilot.models.probe import probe_endpoint
from docpilot.models.registry import model_identity
from tests.support.openai_server import Reply


def test_the_server_finishes_every_turn_it_starts_and_listens_on_loopback_only(tmp_path) -> None:
    command = server_command(tmp_path / "m.gguf", 8123, name="SmolLM2-135M-Instruct", seed=0, threads=2)
    options = dict(zip(command[3::2], command[4::2], strict=False))
    assert command[1:3] == ["-m", "llama_cpp.server"]
    assert options["--interrupt_requests"] == "False" and options["--host"] == "127.0.0.1"
    assert options["--n_threads"] == options["--n_threads_batch"] == "2" and options["--seed"] == "0"
    assert options["--model_alias"] == "SmolLM2-135M-Instruct"


def _identity(settings: ModelConfig) -> dict:
    return model_identity(settings, corpus_fingerprint="c", chunk_words=220)


def test_the_cache_names_the_model_file_and_never_the_port(tmp_path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(2048))
    one = ModelConfig(provider="local", name="m", path=str(gguf), base_url="http://127.0.0.1:8001/v1")
    other = one.model_copy(update={"base_url": "http://127.0.0.1:9002/v1"})
    assert _identity(one) == _identity(other)
    before = _identity(one)
    assert before["model_file"] == file_identity(gguf) and "base_url" not in before
    gguf.write_bytes(b"GGUF" + bytes(4096))  # another model file at the same path
    assert _identity(one) != before


def test_a_model_path_that_is_no_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="model.path"):
        model_file(str(tmp_path / "missing.gguf"))


def test_a_busy_or_failing_endpoint_passes_the_probe(openai_server) -> None:
    # 429 and 5xx are the retries' business, not a reason to stop before the first record.
    base_url, script = openai_server
    for reply in (Reply.failure(429), Reply.failure(503), Reply(answer="OK")):
        script.reset(reply)
        probe_endpoint(base_url, "m", None)
        assert len(script.history) == 1 and script.history[0].body["max_tokens"] == 1
