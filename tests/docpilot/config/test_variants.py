"""Variants in the config file and on the command line (docpilot/config/variants.py): parsed, checked, applied."""

from __future__ import annotations

import pytest

from docpilot.config.loading import load_config
from docpilot.config.model import Config
from docpilot.config.variants import declared_variants, parse_variant_option, resolve
from docpilot.errors import ConfigError
from docpilot.models.registry import model_variants, provider_defaults


def test_a_variant_option_gives_its_name_and_typed_overrides():
    assert parse_variant_option("top3=prime.top_k=3,guard.mode=on") == ("top3", {"prime.top_k": 3,
                                                                               "guard.mode": "on"})
    assert parse_variant_option("base") == ("base", {})
    with pytest.raises(ConfigError, match="is not KEY=VALUE"):
        parse_variant_option("top3=prime.top_k")


def test_the_models_shorthand_names_each_variant_as_written():
    assert model_variants("extractive,local,openai:gpt-4o-mini") == [
        ("extractive", {"model.provider": "extractive"}),
        ("local", {"model.provider": "local"}),
        ("openai:gpt-4o-mini", {"model.provider": "openai", "model.name": "gpt-4o-mini"}),
    ]
    with pytest.raises(ConfigError, match="unknown model provider 'ollama'"):
        model_variants("extractive,ollama")


def test_variants_apply_their_overrides_and_keep_everything_else():
    base = Config()
    variants = resolve(base, [("k5", {}), ("k3", {"prime": {"top_k": 3}}), ("smol", {"model.provider": "local"})],
                       provider_defaults)
    assert [v.name for v in variants] == ["k5", "k3", "smol"]
    assert variants[0].config.prime.top_k == 5 and variants[1].config.prime.top_k == 3
    assert variants[1].overrides == {"prime.top_k": 3}
    smol = variants[2].config.model
    assert (smol.provider, smol.name, smol.concurrency) == ("local", "SmolLM2-135M-Instruct", 1)
    assert all(v.config.golden == base.golden and v.config.variants == {} for v in variants)


@pytest.mark.parametrize(("declared", "said"), [
    ([("a", {}), ("a", {"prime.top_k": 3})], "variant 'a' is named twice"),
    ([("a", {"prime.topk": 3})], "unknown key 'prime.topk'.*\n  fix: did you mean prime.top_k"),
    ([("a", {"render.style": "x"})], "unknown key 'render.style'"),
    ([("a", {"golden": "other.yaml"})], "may not change 'golden'"),
    ([("a", {"corpus.docs": "elsewhere"})], "may not change 'corpus.docs'.*the docs"),
    ([("a", {"split": "test"})], "may not change 'split'.*--split"),
    ([("a", {"prime.top_k": 0})], "variant 'a': prime.top_k"),
    ([("two words", {})], "variant name 'two words' cannot be used"),
])
def test_bad_variants_are_refused_with_the_fix(declared, said):
    with pytest.raises(ConfigError, match="(?s)" + said):
        resolve(Config(), declared)


def test_the_config_files_variants_are_checked_where_they_are_written(tmp_path):
    path = tmp_path / "docpilot.yaml"
    path.write_text("variants:\n  base: {}\n  top3:\n    prime.top_k: 3\n  docs:\n    corpus:\n      docs: x\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert f"{path}:7: variant 'docs': a variant may not change 'corpus.docs'" in str(caught.value)
    path.write_text("variants:\n  base:\n  top3:\n    prime.top_k: 3\n")
    config = load_config(path)
    assert declared_variants(config) == [("base", {}), ("top3", {"prime.top_k": 3})]


def test_command_line_variants_replace_the_config_files():
    config = Config(variants={"a": {}, "b": {"prime.top_k": 3}})
    declared = declared_variants(config, options=["c=prime.top_k=2"], models=model_variants("extractive"))
    assert declared == [("extractive", {"model.provider": "extractive"}), ("c", {"prime.top_k": 2})]
