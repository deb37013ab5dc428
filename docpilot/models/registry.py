"""The model providers DocPilot has, as data: how each is built, named for the cache and chosen on the command line.

A provider is one module with a ``build(settings, *, corpus, idf) -> Model`` function
(and, when its cache key holds more than its endpoint, an ``identity`` function), plus
one entry in ``PROVIDERS``. Everything else reads the entry: the config check, the
``--provider`` choices of ``eval`` and ``serve``, what ``--provider NAME`` alone sets,
the endpoint's probe (``models.probe``) and the model lane.

The entry names its module rather than importing it: checking a config's provider, or
the cache key of a run whose turns are all stored, loads no model client.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from docpilot.errors import ConfigError

if TYPE_CHECKING:
    from docpilot.config.model import ModelConfig
    from docpilot.corpus.pages import Corpus
    from docpilot.models.base import Model


@dataclass(frozen=True)
class Provider:
    """One model provider."""

    module: str
    """The module whose ``build(settings, *, corpus, idf)`` makes the model (and ``identity``, if ``identified``)."""
    code: tuple[str, ...]
    """The modules whose code decides the provider's raw reply: their digest is part of the model-stage cache key.
    What a reply means (a refusal, an error) is read by ``base.read_reply`` whenever a turn is
    made or read back from the cache, so those rules are left out: a change of them reaches
    cached turns as they are."""
    endpoint: Literal["none", "probed", "served"]
    """``none``: answers in this process; ``probed``: an HTTP endpoint, probed before the first turn;
    ``served``: a server the run starts (then probes) itself, unless ``model.base_url`` names one."""
    summary: str
    """One line for ``--help``."""
    identified: bool = False
    """Its cache key holds what the module's ``identity(settings, *, corpus_fingerprint, chunk_words)``
    gives; otherwise the endpoint (``model.base_url``)."""
    api_key: bool = False
    """It sends the API key of the environment (``net.keys``)."""
    default_name: str | None = None
    """The model ``--provider NAME`` alone asks for."""
    default_concurrency: int | None = None
    """The turns in flight ``--provider NAME`` alone sets."""

    def hook(self, name: str) -> Any:
        """A function of the provider's module, imported now."""
        return getattr(importlib.import_module(self.module), name)


_HOSTED_CODE = ("docpilot.models.registry", "docpilot.models.openai", "docpilot.models.wire")

PROVIDERS: dict[str, Provider] = {
    # The extractive model also weighs words by the corpus's chunks, as the corpus code cuts them.
    "extractive": Provider(
        "docpilot.models.extractive",
        ("docpilot.models.registry", "docpilot.models.extractive", "docpilot.retrieval.tokens", "docpilot.corpus"),
        endpoint="none", identified=True, summary="the offline baseline, sentences taken from the sources",
    ),
    "openai": Provider(
        "docpilot.models.openai", _HOSTED_CODE, endpoint="probed", api_key=True, default_name="gpt-4o-mini",
        summary="any OpenAI-compatible endpoint (--base-url)",
    ),
    # llama.cpp's server answers one request at a time: more in flight would only queue,
    # and the queue would be measured as the model's latency.
    "local": Provider(
        "docpilot.models.local", (*_HOSTED_CODE, "docpilot.models.local"), endpoint="served", identified=True,
        default_name="SmolLM2-135M-Instruct", default_concurrency=1,
        summary="SmolLM2 served by llama.cpp for the run (needs the local extra)",
    ),
}
"""Every provider, by the name ``model.provider`` and ``--provider`` take."""


def provider_of(settings: ModelConfig) -> Provider:
    """The settings' provider; ConfigError naming the valid ones when there is no such provider."""
    provider = PROVIDERS.get(settings.provider)
    if provider is None:
        raise ConfigError(f"unknown model provider {settings.provider!r}", hint=f"use one of: {', '.join(PROVIDERS)}")
    return provider


def provider_help() -> str:
    """The ``--provider`` option's help: each provider and what it is."""
    return "Model provider: " + "; ".join(f"{name}: {p.summary}" for name, p in PROVIDERS.items()) + "."


def model_identity(settings: ModelConfig, *, corpus_fingerprint: str, chunk_words: int) -> dict:
    """Everything a model's reply depends on besides the messages: the model-stage cache key.

    The settings every provider reads, a digest of the provider's code (``Provider.code``),
    and the provider's own part: its endpoint, or what its ``identity`` gives (the
    extractive model: the corpus and how it is cut; the local one: its model file).
    """
    from docpilot.codebase import digest_code

    provider = PROVIDERS.get(settings.provider)
    identity = {
        "provider": settings.provider,
        "model": settings.name,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "seed": settings.seed,
        "code": digest_code(*(provider.code if provider else ("docpilot.models",))),
    }
    if provider is not None and provider.identified:
        identity.update(provider.hook("identity")(settings, corpus_fingerprint=corpus_fingerprint,
                                                  chunk_words=chunk_words))
    else:
        identity.update(base_url=settings.base_url)
    return identity


def build_model(settings: ModelConfig, *, corpus: Corpus, idf: dict[str, float] | None = None) -> Model:
    """The model named by the settings, ready to answer.

    ``idf`` lets a caller that builds the extractive model often pass the corpus's word
    weights once computed, instead of recounting the corpus each time.
    """
    return provider_of(settings).hook("build")(settings, corpus=corpus, idf=idf)


def flag_overrides(
    *,
    docs: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """The config ``overrides`` the command line's shared flags stand for; unset flags are None.

    A provider named on the command line without a model gets that provider's usual
    model (and turns in flight), so ``--provider openai`` alone is a complete choice.
    ``load_config`` drops the None values.
    """
    chosen = PROVIDERS.get(provider or "")
    if chosen is not None:
        model = model or chosen.default_name
        concurrency = concurrency or chosen.default_concurrency
    return {
        "corpus": {"docs": docs},
        "model": {"provider": provider, "name": model, "base_url": base_url, "concurrency": concurrency},
    }


def provider_defaults(provider: str, run_provider: str) -> dict[str, Any]:
    """The dotted settings a variant naming ``provider`` gets unless it sets them, as ``--provider`` gives them.

    ``run_provider`` is the provider of the run's own configuration: a variant that moves
    to another provider does not inherit that one's model name. A provider whose server
    the run starts (``local``) also starts its own, whatever address the run names.
    """
    chosen = PROVIDERS[provider]
    if chosen.endpoint == "served":
        return {"model.name": chosen.default_name, "model.concurrency": chosen.default_concurrency,
                "model.base_url": None}
    if provider == run_provider:
        return {}
    from docpilot.config.model import ModelConfig

    return {"model.name": chosen.default_name or ModelConfig.model_fields["name"].default}


def model_variants(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``--models extractive,local,openai:gpt-4o-mini``: one variant per model, named as written."""
    declared = []
    for spec in (part.strip() for part in text.split(",")):
        provider, _, name = spec.partition(":")
        if provider not in PROVIDERS:
            raise ConfigError(f"--models: unknown model provider {provider!r} in {spec!r}",
                              hint=f"name each model PROVIDER or PROVIDER:MODEL, with a provider of {', '.join(PROVIDERS)}")
        overrides: dict[str, Any] = {"model.provider": provider}
        if name:
            overrides["model.name"] = name
        declared.append((spec, overrides))
    return declared
