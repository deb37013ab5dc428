"""Choosing and building the model a run uses, and naming it for the cache."""

from __future__ import annotations

from typing import TYPE_CHECKING

from docpilot.errors import ConfigError

if TYPE_CHECKING:  # the names only: checking a config's provider loads neither the docs' code nor the models'
    from docpilot.config.model import ModelConfig
    from docpilot.corpus.pages import Corpus
    from docpilot.models.base import Model

PROVIDERS = ("extractive", "openai", "local")
TURN_RULES = 2
"""Version of the rules that make a reply an answer, part of a hosted model's cache key.

Turns stored before a reply needed a ``finish_reason`` may be the silently cut ones, so
they are not reused."""


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
    elif settings.provider == "local":
        # The port changes from run to run; the model file and the server's settings do not.
        from docpilot.models.local import CONTEXT_TOKENS, file_identity, model_file

        identity.update(turn_rules=TURN_RULES, model_file=file_identity(model_file(settings.path)),
                        context_tokens=CONTEXT_TOKENS)
    else:
        identity.update(turn_rules=TURN_RULES, base_url=settings.base_url)
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
        from docpilot.models.keys import api_key_from_env
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
