"""Choosing and building the model a run uses, and naming it for the cache."""

from __future__ import annotations

from docpilot.config.model import ModelConfig
from docpilot.corpus.pages import Corpus
from docpilot.errors import ConfigError
from docpilot.models.base import Model

PROVIDERS = ("extractive", "openai")


def model_identity(settings: ModelConfig, *, corpus_fingerprint: str) -> dict:
    """Everything a model's reply depends on besides the messages: the model-stage cache key.

    The extractive model weighs words by their rarity in the corpus, so its replies also
    depend on the corpus; a hosted model's do not.
    """
    identity = {
        "provider": settings.provider,
        "model": settings.name,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "seed": settings.seed,
    }
    if settings.provider == "extractive":
        identity.update(
            corpus=corpus_fingerprint,
            min_evidence=settings.min_evidence,
            max_sentences=settings.max_sentences,
        )
    else:
        identity["base_url"] = settings.base_url
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
    if settings.provider == "openai":
        from docpilot.models.keys import api_key_from_env
        from docpilot.models.openai import OpenAIModel

        if not settings.base_url:
            raise ConfigError(
                "the openai provider needs an endpoint",
                hint="pass --base-url http://HOST:PORT/v1 or set model.base_url in the config",
            )
        return OpenAIModel(
            base_url=settings.base_url,
            model=settings.name,
            api_key=api_key_from_env(),
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
