"""Drafted follow-ups: a second turn for some drafts, drawn from another section of the same page.

A user's second question leans on the first: "How do I configure caching?" then
"And how do I clear it?". A follow-up draft is made the same way. Its section is a
sibling of the first turn's (another eligible section of the same page, not drafted
from already); its question is one the templates make from that section
(``docpilot.golden.templates``), with the page's subject replaced by a reference:

- where the question names the page's title, the title becomes the reference ("What
  are the options for Caching?" → "What are the options for it?");
- otherwise the reference is added by one of a few fixed phrasings ("And for it, …?",
  "… in that case?").

The reference is ``this option`` when the page's title is a name written in code (in
backticks, a flag, a dotted or underscored setting), else ``it`` or ``that``. Which drafts get a follow-up,
which sibling and which phrasing follow hashes of the ids and the seed, so the same
docs, seed and options give the same file byte for byte. At most one draft in two
gets a follow-up, so the set keeps single questions beside its conversations.

The follow-up's question no longer names what it is about, so it borrows fewer of its
section's words than a first turn does: the drafts' bias figures are reported for first
turns and follow-ups apart.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from docpilot.golden.draft import Draft, Drafted, draft_identifiers, draft_key
from docpilot.golden.templates import Candidate, eligible_sections, pin, words

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus, Section

_PHRASINGS = ("And for {ref}, {lower}?", "{question} in that case?", "And with {ref}, {lower}?")
"""How a reference is added to a question that does not name the page's subject."""
_PROSE_REFERENCES = ("it", "that")
_CODE_REFERENCE = "this option"


def add_follow_ups(drafted: Drafted, corpus: Corpus, *, seed: int = 0) -> Drafted:
    """The drafts with a follow-up added to at most one positive in two that has a sibling section to draw from."""
    eligible, _ = eligible_sections(corpus)
    used = {d.source for d in drafted.drafts if d.source}
    asked = {d.question.lower() for d in drafted.drafts}
    positives = sorted(drafted.positives, key=lambda d: draft_key(seed, f"follow-up\0{d.id}"))
    most = (len(positives) + 1) // 2
    added: dict[str, Draft] = {}
    for draft in positives:
        if len(added) >= most:
            break
        page_id = draft.source.partition("#")[0] if draft.source else None
        siblings = [(s, c) for s, c in eligible.get(page_id, []) if pin(s) not in used]
        follow_up = _follow_up(draft, siblings, corpus.pages[page_id].title, seed, asked) if siblings else None
        if follow_up is not None:
            used.add(follow_up.source)
            asked.add(follow_up.question.lower())
            added[draft.id] = follow_up
    drafts = [replace(d, follow_up=added[d.id]) if d.id in added else d for d in drafted.drafts]
    return replace(drafted, drafts=drafts)


def _follow_up(draft: Draft, siblings: list[tuple[Section, list[Candidate]]], title: str, seed: int,
               asked: set[str]) -> Draft | None:
    """The second turn of ``draft`` from the first sibling (in the seed's order) whose question is new."""
    for section, candidates in sorted(siblings, key=lambda item: draft_key(seed, item[0].id)):
        options = sorted(candidates, key=lambda c: (c.template == "heading" and len(candidates) > 1,
                                                     draft_key(seed, f"{section.id}\0{c.template}\0{c.question}")))
        for candidate in options:
            question = lean(candidate.question, title, draft_key(seed, f"lean\0{draft.id}"))
            if question is None or question.lower() in asked:
                continue
            return Draft(id=draft.id, question=question, gold=(pin(section),), gold_answer=candidate.answer,
                         identifiers=tuple(draft_identifiers(candidate.answer)), split=draft.split,
                         origin=f"template:follow-up-{candidate.template}", source=pin(section))
    return None


def lean(question: str, subject: str, key: str) -> str | None:
    """``question`` worded as a follow-up: ``subject`` (the page's title) replaced by a reference.

    ``key`` (a hex digest) picks the reference and the phrasing, so the choice is fixed
    for a draft and a seed. The title is replaced in the question's prose, or where a
    code span is the title itself, never inside another name. None when the question,
    once leaned, asks about nothing but the reference ("What is it?"): a follow-up asks
    about something of its own.
    """
    number = int(key[:8], 16)
    plain = subject.strip().strip("`")
    coded = subject.strip().startswith("`") or plain.startswith("-") or bool(re.search(r"[._]", plain))
    reference = _CODE_REFERENCE if coded and " " not in plain else _PROSE_REFERENCES[number % len(_PROSE_REFERENCES)]
    named = re.compile(rf"(?:\bthe\s+)?(?<![\w-]){re.escape(plain)}(?![\w-])", re.IGNORECASE)
    if plain and question.lower().startswith(f"{plain.lower()}: "):  # "Workers: how do I start?": the title leads
        question = question[len(plain) + 2:]
        question = question[:1].upper() + question[1:]
    parts = re.split(r"(`[^`]*`)", question)  # prose and code spans, alternately
    replaced = False
    for n, part in enumerate(parts):
        if replaced or not plain:
            break
        if part.startswith("`"):
            if part.strip("`").lower() == plain.lower():
                parts[n], replaced = reference, True
        elif named.search(part):
            parts[n], replaced = named.sub(reference, part, count=1), True
    if replaced:
        leaned = "".join(parts)
        leaned = leaned[:1].upper() + leaned[1:]
    else:
        body = question.rstrip("?").rstrip()
        lower = body if body[:2].isupper() or body.startswith("`") else body[:1].lower() + body[1:]
        leaned = _PHRASINGS[(number >> 4) % len(_PHRASINGS)].format(ref=reference, lower=lower, question=body)
    own = set(words(leaned)) - set(words(reference)) - {"case"}
    return leaned if own else None
