"""Configuration: the shipped file, the layers (file < environment < flags), and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from docpilot.config.loading import load_config, public_config
from docpilot.config.model import Config
from docpilot.errors import ConfigError, DocpilotError

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "configs" / "docpilot.yaml"


def _write(tmp_path: Path, text: str, name: str = "docpilot.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(*args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(*args, **kwargs)
    return caught.value


def _option_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    paths = set()
    for name, field in model.model_fields.items():
        paths.add(prefix + name)
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            paths |= _option_paths(field.annotation, f"{prefix}{name}.")
    return paths


def _key_paths(data: dict, prefix: str = "") -> set[str]:
    paths = set()
    for key, value in data.items():
        paths.add(prefix + key)
        if isinstance(value, dict) and value:
            paths |= _key_paths(value, f"{prefix}{key}.")
    return paths


# The shipped file ----------------------------------------------------------------


def test_shipped_file_loads_to_the_defaults():
    assert load_config(SHIPPED, env={}) == Config()


def test_the_default_retriever_is_hybrid_with_the_shipped_static_embedder():
    # The measured best of what builds an index in seconds (docs/retrieval.md, "The default").
    settings = Config().retrieval
    assert (settings.retriever, settings.embedder, settings.fusion) == ("hybrid", "static", "scores")
    assert load_config(SHIPPED, env={}).retrieval == settings


def test_shipped_file_lists_every_option_with_a_comment():
    text = SHIPPED.read_text(encoding="utf-8")
    assert _key_paths(yaml.safe_load(text)) == _option_paths(Config)
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#") and not line.rstrip().endswith(":"):
            assert " # " in line, f"option without a comment: {line!r}"


# Where the file comes from --------------------------------------------------------


def test_no_path_reads_configs_docpilot_yaml_in_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    _write(tmp_path / "configs", "shard_size: 7\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).shard_size == 7


def test_no_path_and_no_file_gives_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}) == Config()


def test_empty_file_keeps_defaults(tmp_path):
    assert load_config(_write(tmp_path, "# only a comment\n"), env={}) == Config()


def test_named_file_that_is_missing(tmp_path):
    error = _error(tmp_path / "nope.yaml", env={})
    assert "nope.yaml: file not found" in str(error) and "fix:" in str(error)


# File errors ----------------------------------------------------------------------


def test_unknown_key_names_line_and_suggests_the_closest(tmp_path):
    path = _write(tmp_path, "retrieval:\n  bm25: true\n  topk: 3\n")
    error = _error(path, env={})
    text = str(error)
    assert text.startswith(f"{path}: 2 problems:")
    assert f"{path}:3: unknown option 'retrieval.topk'" in text
    assert "did you mean 'top_k'? options of retrieval: retriever, top_k" in text
    assert f"{path}:2: unknown option 'retrieval.bm25'" in text


def test_unknown_top_level_key(tmp_path):
    path = _write(tmp_path, "shard_size: 3\nreport_dir: out\n")
    error = _error(path, env={})
    assert (error.path, error.line) == (str(path), 2)
    assert "unknown option 'report_dir'" in str(error) and "did you mean 'reports_dir'?" in str(error)


def test_wrong_type_names_line_value_and_fix(tmp_path):
    path = _write(tmp_path, "model:\n  name: x\n  concurrency: many\n")
    error = _error(path, env={})
    assert (error.path, error.line) == (str(path), 3)
    assert "model.concurrency must be a whole number from 1 to 1,024, got text 'many'" in str(error)
    assert "fix: write a whole number" in str(error)


def test_out_of_range_value(tmp_path):
    error = _error(_write(tmp_path, "corpus:\n  chunk_words: 5\n"), env={})
    assert error.line == 2 and "corpus.chunk_words must be a whole number from 20 to 100,000, got 5" in str(error)


def test_section_that_is_not_a_mapping(tmp_path):
    error = _error(_write(tmp_path, "\nmodel: gpt\n"), env={})
    assert error.line == 2 and "model must be a mapping, not text 'gpt'" in str(error)


def test_yaml_syntax_error_has_a_line(tmp_path):
    error = _error(_write(tmp_path, "model:\n  name: [a\n  seed: 1\n"), env={})
    assert error.line == 3 and "YAML syntax error" in str(error) and "fix:" in str(error)


def test_top_level_list_is_refused(tmp_path):
    error = _error(_write(tmp_path, "- a\n- b\n"), env={})
    assert error.line == 1 and "not a mapping of options" in str(error)


def test_not_utf8(tmp_path):
    path = tmp_path / "docpilot.yaml"
    path.write_bytes(b"golden: caf\xe9.yaml\n")
    error = _error(path, env={})
    assert error.line == 1 and "byte offset 11" in str(error)


def test_off_stays_text(tmp_path):
    # Regression: YAML 1.1 reads an unquoted `off` as false, which `guard.mode` refused.
    assert load_config(_write(tmp_path, "guard:\n  mode: off\n"), env={}).guard.mode == "off"


def test_key_given_twice(tmp_path):
    error = _error(_write(tmp_path, "shard_size: 1\nshard_size: 2\n"), env={})
    assert error.line == 2 and "'shard_size' is given twice" in str(error)


# Secrets ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "variable"),
    [
        ("model:\n  provider: openai\n  api_key: sk-live-123\n", 3, "DOCPILOT_API_KEY"),
        ("server_token: abc\n", 1, "DOCPILOT_SERVER_TOKEN"),
        ("gates:\n  password: hunter2\n", 2, "DOCPILOT_API_KEY"),
    ],
)
def test_secret_in_the_file_is_refused(tmp_path, text, line, variable):
    error = _error(_write(tmp_path, text), env={})
    assert error.line == line
    assert "looks like a secret" in str(error) and f"set {variable} in the environment" in str(error)
    assert "sk-live-123" not in str(error) and "hunter2" not in str(error)


def test_max_tokens_is_not_a_secret(tmp_path):
    assert load_config(_write(tmp_path, "model:\n  max_tokens: 64\n"), env={}).model.max_tokens == 64


def test_secret_in_the_environment_is_refused_without_echoing_it():
    error = _error(None, env={"DOCPILOT_MODEL__API_KEY": "sk-live-123"})
    assert "DOCPILOT_MODEL__API_KEY" in str(error) and "looks like a secret" in str(error)
    assert "sk-live-123" not in str(error)


def test_secret_in_overrides_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = _error(env={}, overrides={"model": {"token": "abc"}})
    assert "command-line option" in str(error) and "DOCPILOT_SERVER_TOKEN" in str(error)


def test_secret_variables_are_not_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(env={"DOCPILOT_API_KEY": "sk-live-123", "DOCPILOT_SERVER_TOKEN": "t"})
    assert config == Config()
    assert "sk-live-123" not in json.dumps(public_config(config))


# Environment and flags --------------------------------------------------------------


def test_environment_overrides_sections_and_top_level(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(env={
        "DOCPILOT_MODEL__CONCURRENCY": "16",
        "DOCPILOT_RETRIEVAL__TOP_K": "10",
        "DOCPILOT_RETRIEVAL__USE_VOCABULARY": "false",
        "DOCPILOT_GUARD__MODE": "on",
        "DOCPILOT_CACHE_DIR": "/tmp/c",
        "DOCPILOT_REPORTS_DIR": "/tmp/r",
        "DOCPILOT_GATES": "{recall@8: '>= 0.8'}",
        "DOCPILOT_DEBUG": "1",
        "PATH": "/usr/bin",
    })
    assert (config.model.concurrency, config.retrieval.top_k, config.retrieval.use_vocabulary) == (16, 10, False)
    assert (config.guard.mode, config.cache_dir, config.reports_dir) == ("on", "/tmp/c", "/tmp/r")
    assert config.gates == {"recall@8": ">= 0.8"}


def test_text_options_keep_the_value_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(env={"DOCPILOT_MODEL__NAME": "1.5", "DOCPILOT_PRIME__PROMPT_VERSION": "2", "DOCPILOT_MODEL__SEED": "null"})
    assert (config.model.name, config.prime.prompt_version, config.model.seed) == ("1.5", "2", None)


def test_default_environment_is_the_process_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOCPILOT_SHARD_SIZE", "31")
    assert load_config().shard_size == 31


def test_bad_environment_value_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = _error(env={"DOCPILOT_MODEL__CONCURRENCY": "many"})
    assert str(error).startswith("environment variable DOCPILOT_MODEL__CONCURRENCY='many': model.concurrency must be")
    assert "unset DOCPILOT_MODEL__CONCURRENCY" in str(error)


def test_unknown_environment_option_suggests_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = _error(env={"DOCPILOT_MODEL__CONCURENCY": "3"})
    assert "DOCPILOT_MODEL__CONCURENCY" in str(error) and "did you mean 'concurrency'?" in str(error)


def test_layers_apply_in_order(tmp_path):
    path = _write(tmp_path, "model:\n  concurrency: 2\n  retries: 1\nshard_size: 5\n")
    config = load_config(
        path,
        env={"DOCPILOT_MODEL__CONCURRENCY": "4", "DOCPILOT_SHARD_SIZE": "6"},
        overrides={"model": {"concurrency": 9, "name": None}, "golden": None},
    )
    assert (config.model.concurrency, config.model.retries, config.shard_size) == (9, 1, 6)
    assert config.model.name == Config().model.name and config.golden == Config().golden


def test_bad_override_says_it_came_from_the_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = _error(env={}, overrides={"retrieval": {"top_k": 0}})
    assert str(error).startswith("command-line option: retrieval.top_k must be a whole number from 1 to 10,000, got 0")


def test_problems_from_every_layer_are_listed_together(tmp_path):
    path = _write(tmp_path, "shard_size: zero\n")
    text = str(_error(path, env={"DOCPILOT_MODEL__RETRIES": "-1"}, overrides={"prime": {"top_k": "x"}}))
    assert text.startswith("3 problems:")
    assert f"{path}:1: shard_size must be a whole number" in text
    assert "environment variable DOCPILOT_MODEL__RETRIES='-1'" in text
    assert "command-line option: prime.top_k" in text


def test_public_config_is_plain_json():
    config = Config(gates={"recall@8": ">= 0.8"})
    data = public_config(config)
    # Every section but where traces go and how a server stops, which change no number (docs/tracing.md).
    assert json.loads(json.dumps(data)) == data == config.model_dump(exclude={"telemetry", "server"})


# Any input gives a Config or a ConfigError -------------------------------------------

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
_KEYS = st.sampled_from(sorted(_option_paths(Config))).map(lambda p: p.split(".")[-1]) | st.text(max_size=8)
_DATA = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=5), max_leaves=20)
_VARIABLES = st.sampled_from(sorted(_option_paths(Config))).map(lambda p: "DOCPILOT_" + p.upper().replace(".", "__"))
_FUZZ = settings(max_examples=150, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@_FUZZ
@given(data=_DATA)
def test_arbitrary_yaml_data_gives_config_or_config_error(tmp_path, data):
    path = _write(tmp_path, yaml.safe_dump(data))
    try:
        config = load_config(path, env={})
    except ConfigError as exc:
        assert exc.exit_code == 2 and str(exc).strip()
    else:
        assert isinstance(config, Config)


@_FUZZ
@given(env=st.dictionaries(_VARIABLES | st.text(max_size=12).map("DOCPILOT_".__add__), st.text(max_size=12), max_size=4))
def test_arbitrary_environment_gives_config_or_config_error(tmp_path, env):
    try:
        load_config(_write(tmp_path, ""), env=env)
    except DocpilotError as exc:
        assert isinstance(exc, ConfigError)


@_FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_give_config_or_config_error(tmp_path, data):
    path = tmp_path / "docpilot.yaml"
    path.write_bytes(data)
    try:
        load_config(path, env={})
    except DocpilotError as exc:
        assert isinstance(exc, ConfigError) and str(exc).startswith(str(path))
