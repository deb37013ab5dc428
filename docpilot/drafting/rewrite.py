"""Drafts reworded by a model: each template question asked again as a user would ask it.

The model is the configured provider's (``local`` runs SmolLM2 offline), at
temperature 0, told to avoid the section's heading words and to keep the question's
code spans as written, in the docs' language. A rewrite that is refused, fails, is
empty or loses a code span falls back to the template's question, and its origin
says so. The prompt is written at the top of the file of drafts.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from docpilot.golden.draft import Draft, Drafted, source_section
from docpilot.retrieval.tokens import words

if TYPE_CHECKING:
    from docpilot.config.model import Config
    from docpilot.corpus.pages import Corpus

PROMPT = (
    "You reword questions about software documentation. Rewrite the question the way a user of the software "
    "would type it, in {language}, in your own words: avoid the words listed, keep every text in backticks "
    "exactly as written. Reply with the one rewritten question and nothing else."
)
"""The system message; the user message names the question, the words to avoid and the texts to keep."""
_MOST_AVOIDED = 8
_MOST_TOKENS = 64
_TIMEOUT_S = 240.0
_LANGUAGES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "pt": "Portuguese", "it": "Italian",
              "nl": "Dutch", "ja": "Japanese", "zh": "Chinese", "ko": "Korean", "ru": "Russian"}


def rewrite_drafts(drafted: Drafted, corpus: Corpus, config: Config, spec: str) -> tuple[Drafted, list[str]]:
    """The drafts with their positives reworded by the model ``spec`` (``provider[:name]``), and the notes to record."""
    from docpilot.assistant.language import corpus_language
    from docpilot.models.probe import ready_endpoint
    from docpilot.models.registry import build_model, provider_defaults, provider_of

    provider, _, name = spec.partition(":")
    settings = config.model.model_copy(update={"provider": provider})
    provider_of(settings)  # an unknown provider's error names the valid ones
    defaults = {key.removeprefix("model."): value for key, value in provider_defaults(provider, "").items()}
    if provider == config.model.provider and config.model.base_url:
        defaults.pop("base_url", None)  # the config names this provider's server already: it is used, not started
    # A question is short: 64 tokens end a rambling reply early, and a busy CPU may take minutes per turn.
    settings = settings.model_copy(update={**defaults, "temperature": 0.0, "max_tokens": _MOST_TOKENS,
                                           "timeout_s": max(settings.timeout_s, _TIMEOUT_S),
                                           **({"name": name} if name else {})})
    config = config.model_copy(update={"model": settings})
    code = corpus_language(corpus) or "en"
    language = _LANGUAGES.get(code.split("-")[0], code)
    system = PROMPT.format(language=language)
    positives = drafted.positives
    with ready_endpoint(config) as ready:
        served = ready()
        model = build_model(served.model, corpus=corpus)
        replies = asyncio.run(_ask_all(model, [_messages(system, corpus, d) for d in positives],
                                       max(served.model.concurrency, 1)))
    label = f"model:{provider}/{settings.name}"
    by_id = {d.id: _rewritten(d, reply, label) for d, reply in zip(positives, replies, strict=True)}
    drafts = [by_id.get(d.id, d) for d in drafted.drafts]
    fell_back = sum(1 for d in by_id.values() if not d.origin.startswith("model:"))
    notes = [
        f"Questions reworded by {label} at temperature 0 (seed {settings.seed}); {fell_back} of {len(positives)} "
        "kept the template's question (refused, failed, or lost a code span). The system prompt:",
        *_wrapped(system),
        "The user message: Question: <template question> / Avoid these words: <heading words> / "
        "Keep as written: <code spans>",
    ]
    return replace(drafted, drafts=drafts), notes


def _messages(system: str, corpus: Corpus, draft: Draft) -> list[dict[str, str]]:
    section = source_section(corpus, draft.source or "")
    heading = section.title if section is not None else ""
    avoided = list(dict.fromkeys(words(heading)))[:_MOST_AVOIDED]
    kept = [span for span in draft.identifiers if f"`{span}`" in draft.question]
    user = f"Question: {draft.question}\nAvoid these words: {', '.join(avoided) or '(none)'}\n" \
           f"Keep as written: {', '.join(f'`{k}`' for k in kept) or '(nothing)'}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


async def _ask_all(model, conversations: list[list[dict[str, str]]], concurrency: int) -> list:
    from docpilot import progress
    from docpilot.models.base import Prompt

    gate = asyncio.Semaphore(concurrency)
    with progress.shown() as shown:
        shown.start("rewrite", len(conversations))

        async def ask(messages: list[dict[str, str]]):
            async with gate:
                turn = await model.complete(Prompt(question=messages[-1]["content"], messages=messages))
            shown.advance("rewrite")
            return turn

        try:
            return await asyncio.gather(*(ask(m) for m in conversations))
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()


def _rewritten(draft: Draft, turn, label: str) -> Draft:
    """The draft with the model's question, or with its template's and the reason."""
    why = None
    text = " ".join((turn.answer or "").strip().split("\n")[0].split()).strip("\"' ")
    text = text.removeprefix("Question:").strip()
    kept = [span for span in draft.identifiers if f"`{span}`" in draft.question]
    if turn.error:
        why = f"the turn failed ({turn.error_code or 'error'})"
    elif turn.refused:
        why = "the model refused"
    elif len(text.split()) < 3:
        why = "the reply was empty or too short"
    elif any(span not in text for span in kept):
        why = "the rewrite lost a code span"
    if why:
        return replace(draft, origin=f"{draft.origin} ({label} fell back: {why})")
    question = text if text.endswith("?") else text.rstrip(".") + "?"
    return replace(draft, question=question, origin=label, template_question=draft.question)


def _wrapped(text: str, width: int = 96) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines
