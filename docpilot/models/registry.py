"""Choosing and building the model a run uses, and naming it for the cache."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from docpilot.errors import ConfigError

if TYPE_CHECKING:  # the names only: checking a config's provider loads neither the docs' code nor the models'
    from docpilot.config.model import ModelConfig
    from docpilot.corpus.pages import Corpus
    from docpilot.models.base import Model

PROVIDERS = ("extractive", "openai", "local")

# The modules whose code decides a provider's raw reply. What a reply means (a refusal, an
# error) is read from it by ``base.read_reply`` whenever a turn is made or read back from
# the cache, so those rules are left out: a change of them reaches cached turns as they are.
_HOSTED_CODE = ("docpilot.models.registry", "docpilot.models.openai", "docpilot.models.wire")
MODEL_CODE: dict[str, tuple[str, ...]] = {
    # The extractive model also weighs words by the corpus's chunks, as the corpus code cuts them.
    "extractive": ("docpilot.models.registry", "docpilot.models.extractive", "docpilot.retrieval.tokens",
                   "docpilot.corpus"),
    "openai": _HOSTED_CODE,
    "local": (*_HOSTED_CODE, "docpilot.models.local"),
}
"""Per provider, the modules whose digest is part of its model-stage cache key."""


def model_identity(settings: ModelConfig, *, corpus_fingerprint: str, chunk_words: int) -> dict:
    """Everything a model's reply depends on besides the messages: the model-stage cache key.

    The extractive model weighs words by their rarity over the corpus's chunks, so its
    replies also depend on the corpus and on how it is cut (``corpus.chunk_words``); a
    hosted model's do not. Each provider's identity holds a digest of the code that
    makes its reply (``MODEL_CODE``).
    """
    from docpilot.codebase import digest_code

    identity = {
        "provider": settings.provider,
        "model": settings.name,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "seed": settings.seed,
        "code": digest_code(*MODEL_CODE.get(settings.provider, ("docpilot.models",))),
    }
    if settings.provider == "extractive":
        identity.update(
            corpus=corpus_fingerprint,
            chunk_words=chunk_words,
            min_evidence=settings.min_evidence,
            max_sentences=settings.max_sentences,
        )
    elif settings.provider == "local":
        # The port changes from run to run; the model file and the server's settings do not.
        from docpilot.models.local import CONTEXT_TOKENS, file_identity, model_file

        identity.update(model_file=file_identity(model_file(settings.path)), context_tokens=CONTEXT_TOKENS)
    else:
        identity.update(base_url=settings.base_url)
    return identity


def build_model(settings: ModelConfig, *, corpus: Corpus, idf: dict[str, float] | None = None) -> Model:
    """The model named by the settings, ready to answer.

    ``idf`` lets a caller that builds the extractive model often pass the corpus's word
    weights once computed, instead of recounting the corpus each time.
    """
    if settings.provider == "extractive":
        from docpilot.models.extractive import ExtractiveModel, document_frequencies

        return ExtractiveModel(
            idf=idf if idf is not None else document_frequencies([c.text for c in corpus.chunks]),
            min_evidence=settings.min_evidence,
            max_sentences=settings.max_sentences,
        )
    if settings.provider in ("openai", "local"):
        from docpilot.net.keys import api_key_from_env
        from docpilot.models.openai import OpenAIModel

        if not settings.base_url:
            if settings.provider == "local":
                raise ConfigError(
                    "the local provider's server is not running",
                    hint="run the eval through `docpilot eval --provider local`, which starts it",
                )
            raise ConfigError(
                "the openai provider needs an endpoint",
                hint="pass --base-url http://HOST:PORT/v1 or set model.base_url in the config",
            )
        return OpenAIModel(
            base_url=settings.base_url,
            model=settings.name,
            # The local server asks for no key; one meant for a hosted service stays home.
            api_key=api_key_from_env() if settings.provider == "openai" else None,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            seed=settings.seed,
            timeout_s=settings.timeout_s,
            retries=settings.retries,
        )
    raise ConfigError(
        f"unknown model provider {settings.provider!r}",
        hint=f"use one of: {', '.join(PROVIDERS)}",
    )


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
    model, so ``--provider openai`` alone is a complete choice. ``load_config`` drops
    the None values.
    """
    overrides: dict[str, Any] = {
        "corpus": {"docs": docs},
        "model": {"provider": provider, "name": model, "base_url": base_url, "concurrency": concurrency},
    }
    if provider == "local":
        from docpilot.models.local import DEFAULT_NAME

        overrides["model"]["name"] = model or DEFAULT_NAME
        # llama.cpp's server answers one request at a time: more in flight would only queue,
        # and the queue would be measured as the model's latency.
        overrides["model"]["concurrency"] = concurrency or 1
    elif provider and provider != "extractive" and not model:
        overrides["model"]["name"] = "gpt-4o-mini"
    return overrides


def provider_defaults(provider: str, run_provider: str) -> dict[str, Any]:
    """The dotted settings a variant naming ``provider`` gets unless it sets them, as ``--provider`` gives them.

    ``run_provider`` is the provider of the run's own configuration: a variant that moves
    to another provider does not inherit that one's model name.
    """
    if provider == "local":
        from docpilot.models.local import DEFAULT_NAME

        # llama.cpp's server answers one turn at a time; its address is the run's own.
        return {"model.name": DEFAULT_NAME, "model.concurrency": 1, "model.base_url": None}
    if provider == "extractive":
        return {"model.name": "extractive-v1"}
    if provider != run_provider:
        return {"model.name": "gpt-4o-mini"}
    return {}


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
