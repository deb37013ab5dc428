"""Drafting a golden set from the docs: which sections get a question, which question, and the file of drafts.

A draft is a start for a person to review, never a measurement. Without a model it
is made from the docs' own structure, offline and deterministically (the same docs,
seed and options give the same file byte for byte):

- **Coverage.** The eligible sections (``docpilot.golden.templates``) are ordered by a
  seeded hash of their id, so adding a page does not reshuffle the others' order. Every eligible page gets
  its first section by that order, then the rest are taken by the same order (so each
  page's share follows its number of eligible sections), at most ``per_page`` a page,
  until ``count``. When ``count`` is below the number of pages, the pages first in the
  hash order get one each.
- **Questions** come from the templates of ``docpilot.golden.templates`` (headings,
  definitions, options, flags, settings, defaults). The reference answer is the
  sentence the question was drawn from, checked to be in the section; the identifiers
  are the code spans in it; the gold entry is the section.
- **Negatives**, a few per set, are questions the docs should not answer: a key term
  of a drafted question swapped for one that appears nowhere in the docs, and a
  product or platform the docs never name. A generated negative may still be
  answered somewhere, so each carries the tag ``needs-check``.
- **Splits** follow a hash of the page, so one page never feeds both dev and test: a
  question on a page tuned on in dev would otherwise flatter test through its
  neighbours.

Each draft records its ``origin`` (the template) and its ``source`` section. What the
section said when it was drafted from goes into the drafts' lock (``drafts.lock``
beside ``drafts.yaml``, ``docpilot.golden.lock``), as for any golden set, so ``golden
check`` says once a section changed, and ``golden accept`` carries it into the golden
set's lock.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from docpilot.golden.starter import unique_id
from docpilot.golden.templates import (
    CODE_SPAN,
    Candidate,
    LeftOut,
    eligible_sections,
    pin,
    words,
)
from docpilot.metrics.gold import TOP
from docpilot.schema import Conversation, GoldenRecord

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus, Section

DEFAULT_COUNT = 100
"""Positives drafted when ``--count`` is not given."""
DEFAULT_PER_PAGE = 3
"""Most positives drawn from one page."""
MOST_IDENTIFIERS = 4
"""Code spans of an answer kept as its identifiers, at most."""
DRAFT_TAG = "draft"
FOLLOW_UP_TAG = "follow-up"
"""Tag of a drafted conversation: a question and a follow-up that leans on it."""
CHECK_TAG = "needs-check"
"""Tag of a draft that a person must confirm before it is used: a generated negative."""
_FAKE_TERMS = ("zephyrine", "quorvex", "flumaster", "nebulite", "vortaxis", "glacine", "prismell", "tangelox",
               "orbiquant", "lumidrift", "cindrelle", "marbleon")
"""Made-up words for a swapped term: each is checked to be absent from the docs before use."""
_PRODUCTS = ("Salesforce Commerce Cloud", "SAP HANA", "IBM Db2", "Oracle E-Business Suite", "Heroku", "Netlify",
             "Cloudflare Workers", "Firebase", "Vercel", "DigitalOcean App Platform", "Alibaba Cloud", "Tencent Cloud",
             "OpenShift", "Nomad", "TeamCity", "Bitbucket Pipelines", "Windows Phone", "Symbian", "AS/400",
             "Lotus Notes", "ColdFusion", "Sybase", "Informix", "Solaris", "HP-UX", "OS/2", "Amiga", "BlackBerry OS")
"""Products and platforms for a negative: each is checked to be named nowhere in the docs before use."""

@dataclass(frozen=True)
class Draft:
    """One drafted record, as it is written to the file of drafts."""

    id: str
    question: str
    gold: tuple[str, ...]
    """The section the question was drawn from (empty for a negative)."""
    gold_answer: str | None
    identifiers: tuple[str, ...]
    split: str
    origin: str
    """``template:<name>``, or the model that rewrote the question."""
    tags: tuple[str, ...] = (DRAFT_TAG,)
    source: str | None = None
    """The gold entry the draft was drawn from; None for a negative."""
    expected_cause: str | None = None
    template_question: str | None = None
    """The template's question, when a model rewrote it (kept to fall back on, never written)."""
    follow_up: Draft | None = None
    """A second turn asked after this one (``--follow-ups``): the draft is then written as a conversation."""


@dataclass(frozen=True)
class Drafted:
    """What a draft run made and what it covered."""

    drafts: list[Draft]
    eligible_pages: int
    covered_pages: int
    eligible_sections: int
    covered_sections: int
    pages: int
    left_out: list[LeftOut] = field(default_factory=list)
    """Pages and sections that got no draft, with the reason, in docs order."""

    @property
    def positives(self) -> list[Draft]:
        return [d for d in self.drafts if d.gold]

    @property
    def negatives(self) -> list[Draft]:
        return [d for d in self.drafts if not d.gold]

    @property
    def follow_ups(self) -> list[Draft]:
        """The second turns of the drafts written as conversations."""
        return [d.follow_up for d in self.drafts if d.follow_up is not None]


def page_split(page_id: str) -> str:
    """The split of every question on a page: a hash of the page id, so a page feeds dev or test, never both."""
    return "dev" if hashlib.sha256(f"split\0{page_id}".encode()).digest()[0] % 2 == 0 else "test"


def source_section(corpus: Corpus, source: str) -> Section | None:
    """The section a draft's ``source`` names (``page#(top)`` is the text above the first heading)."""
    page, _, anchor = source.partition("#")
    return corpus.sections.get(f"{page}#" if anchor == TOP else source)


def draft_golden(corpus: Corpus, *, count: int = DEFAULT_COUNT, per_page: int = DEFAULT_PER_PAGE, seed: int = 0,
                 negatives: int | None = None) -> Drafted:
    """Draft ``count`` positives (fewer when the docs have fewer eligible sections) and a few negatives."""
    eligible, left_out = eligible_sections(corpus)
    keys = {section.id: draft_key(seed, section.id) for sections in eligible.values() for section, _ in sections}
    chosen, used, not_taken = _choose(eligible, keys, count=count, per_page=per_page, seed=seed,
                                     titles={page_id: page.title for page_id, page in corpus.pages.items()})
    left_out += not_taken
    order = {section_id: n for n, section_id in enumerate(corpus.sections)}
    chosen.sort(key=lambda item: order[item[0].id])
    ids: set[str] = set()
    drafts = [_draft(corpus, section, candidate, ids) for section, candidate in chosen]
    wanted = max(2, count // 10) if negatives is None else negatives
    drafts += _negatives(corpus, drafts, wanted, seed, ids, used)
    covered_pages = {d.source.partition("#")[0] for d in drafts if d.source}
    position = {page_id: n for n, page_id in enumerate(corpus.pages)}
    left_out.sort(key=lambda item: (position.get(item.id.partition("#")[0], 0), order.get(item.id, -1)))
    return Drafted(
        drafts=drafts, eligible_pages=len(eligible), covered_pages=len(covered_pages),
        eligible_sections=len(keys), covered_sections=len(chosen), pages=len(corpus.pages), left_out=left_out,
    )


def drafts_text(drafted: Drafted, *, docs: str, seed: int, notes: Sequence[str] = ()) -> str:
    """The file of drafts: a commented YAML list in the golden-set schema, every value JSON-quoted."""
    positives, negatives = drafted.positives, drafted.negatives
    lines = [
        f"# Drafts of a golden set, written by `docpilot golden draft` from {docs} (seed {seed}):",
        f"# {len(positives)} questions from {drafted.covered_sections} of {drafted.eligible_sections} eligible "
        f"sections on {drafted.covered_pages} of {drafted.eligible_pages} eligible pages, and {len(negatives)} "
        "negatives.",
        "# A draft is a start, never the proof: read each one against its section, reword the question",
        "# as your users would ask it, trim the gold answer, then move it into the golden set with",
        "# `docpilot golden accept ID... --into evals/golden.yaml`. Negatives (tag needs-check) are",
        "# guesses that the docs do not answer: confirm each before accepting it.",
        "# `docpilot golden check --golden THIS_FILE` shows how much each question borrows from its section.",
        "# origin: what wrote the question; source: the section it was drawn from. What each section said",
        "# is locked in the drafts' lock beside this file, so `docpilot golden check` tells a stale draft.",
        *(f"# {note}" for note in notes),
        "",
    ]
    if drafted.follow_ups:
        lines[-1:-1] = [
            f"# {len(drafted.follow_ups)} drafts are conversations (tag follow-up): a second turn drawn from another "
            "section of",
            "# the same page, worded to lean on the first (its subject replaced by a reference). Comments above",
            "# each say what wrote its turns and the sections they came from; accept takes the whole conversation.",
        ]
    for draft in drafted.drafts:
        lines += _record_lines(draft)
    return "\n".join(lines)


def record_lines(fields: dict, indent: str = "") -> list[str]:
    """One record as YAML lines (``- id: …`` first), each value JSON-quoted so no YAML reading surprises.

    A conversation's ``turns`` (a list of mappings) are written as a block list below
    it, each turn's fields one a line.
    """
    lines = []
    for n, (name, value) in enumerate(fields.items()):
        lead = f"{indent}- " if n == 0 else f"{indent}  "
        if name == "turns":
            lines.append(f"{lead}turns:")
            lines += [line for turn in value for line in record_lines(turn, indent + "    ")[:-1]]
        elif isinstance(value, (list, tuple)):
            shown = ", ".join(json.dumps(item, ensure_ascii=False) for item in value)
            lines.append(f"{lead}{name}: [{shown}]")
        else:
            lines.append(f"{lead}{name}: {json.dumps(value, ensure_ascii=False)}")
    return [*lines, ""]


def draft_fields(draft: Draft) -> dict:
    """The fields of a draft's record, in the order a golden set writes them; empty ones left out."""
    fields: dict = {"id": draft.id, "question": draft.question, "gold": list(draft.gold)}
    if draft.gold_answer is not None:
        fields["gold_answer"] = draft.gold_answer
    if draft.identifiers:
        fields["identifiers"] = list(draft.identifiers)
    if draft.expected_cause:
        fields["expected_cause"] = draft.expected_cause
    fields.update(split=draft.split, tags=list(draft.tags), origin=draft.origin)
    if draft.source:
        fields.update(source=draft.source)
    return fields


def conversation_fields(draft: Draft) -> dict:
    """The fields of a draft with a follow-up, as a conversation: the record's split and tags, each turn its own."""
    turns = []
    for turn in (draft, draft.follow_up):
        fields = {name: value for name, value in draft_fields(turn).items()
                  if name in ("question", "gold", "gold_answer", "identifiers", "expected_cause")}
        turns.append(fields)
    return {"id": draft.id, "split": draft.split, "tags": [*draft.tags, FOLLOW_UP_TAG], "turns": turns}


def draft_records(drafted: Drafted) -> list[GoldenRecord]:
    """The drafts as a golden set reads them: one record per question, a conversation one per turn."""
    records: list[GoldenRecord] = []
    for draft in drafted.drafts:
        if draft.follow_up is not None:
            records += Conversation.model_validate(conversation_fields(draft)).records()
        else:
            records.append(GoldenRecord(id=draft.id, question=draft.question, gold=list(draft.gold),
                                        gold_answer=draft.gold_answer, identifiers=list(draft.identifiers),
                                        split=draft.split, tags=list(draft.tags),
                                        expected_cause=draft.expected_cause))
    return records


def _record_lines(draft: Draft) -> list[str]:
    if draft.follow_up is None:
        return record_lines(draft_fields(draft))
    said = [f"turn {n}: {turn.origin} from {turn.source}" for n, turn in enumerate((draft, draft.follow_up), 1)]
    return [f"# {'; '.join(said)}", *record_lines(conversation_fields(draft))]


# Choosing -----------------------------------------------------------------------


def draft_key(seed: int, name: str) -> str:
    """The hash that orders drafts, sections and choices for a seed: the same name and seed, the same key."""
    return hashlib.sha256(f"{seed}\0{name}".encode()).hexdigest()


def _choose(eligible: dict[str, list[tuple[Section, list[Candidate]]]], keys: dict[str, str], *, count: int,
            per_page: int, seed: int, titles: dict[str, str]) -> tuple[list[tuple[Section, Candidate]], set[str],
                                                                       list[LeftOut]]:
    """The sections drafted, each with its question; the questions used; the eligible sections left out."""
    chosen: list[tuple[Section, Candidate]] = []
    used: set[str] = set()
    taken: Counter[str] = Counter()
    tried: set[str] = set()
    left_out: list[LeftOut] = []
    ordered = {page: sorted(sections, key=lambda item: keys[item[0].id]) for page, sections in eligible.items()}

    def take(section: Section, candidates: list[Candidate]) -> bool:
        tried.add(section.id)
        options = sorted(candidates, key=lambda c: (c.template == "heading" and len(candidates) > 1,
                                                     draft_key(seed, f"{section.id}\0{c.template}\0{c.question}")))
        # A question another page also gives ("How do I register …?") is told apart by its page's title.
        options += [replace(c, question=f"{c.question.rstrip('?')} in {titles[section.page_id]}?") for c in options]
        fresh = next((c for c in options if c.question.lower() not in used), None)
        if fresh is None:
            left_out.append(LeftOut(pin(section), "its question repeats another draft's"))
            return False
        used.add(fresh.question.lower())
        chosen.append((section, fresh))
        taken[section.page_id] += 1
        return True

    pages = sorted(ordered, key=lambda page: draft_key(seed, page))
    for page in pages:  # one a page first, in the pages' hash order
        if len(chosen) >= count:
            break
        any(take(section, candidates) for section, candidates in ordered[page])
    rest = sorted((item for sections in ordered.values() for item in sections if item[0].id not in tried),
                  key=lambda item: keys[item[0].id])
    for section, candidates in rest:
        if len(chosen) >= count:
            left_out.append(LeftOut(pin(section), "beyond --count"))
        elif taken[section.page_id] >= per_page:
            left_out.append(LeftOut(pin(section), f"its page has --per-page {per_page} drafts"))
        else:
            take(section, candidates)
    for page in pages:
        if not taken[page] and not any(item.id.partition("#")[0] == page for item in left_out):
            left_out.append(LeftOut(page, "beyond --count"))
    return chosen, used, left_out


def _draft(corpus: Corpus, section: Section, candidate: Candidate, ids: set[str]) -> Draft:
    pinned = pin(section)
    base = section.page_id.rsplit("/", 1)[-1] + ("-" + section.anchor if section.anchor else "")
    return Draft(
        id=unique_id(_slug(base), ids),
        question=candidate.question,
        gold=(pinned,),
        gold_answer=candidate.answer,
        identifiers=tuple(draft_identifiers(candidate.answer)),
        split=page_split(section.page_id),
        origin=f"template:{candidate.template}",
        source=pinned,
    )


def draft_identifiers(answer: str) -> list[str]:
    """A drafted answer's identifiers: its code spans, first first, at most ``MOST_IDENTIFIERS``."""
    spans = []
    for span in CODE_SPAN.findall(answer):
        span = span.strip()
        if span and span not in spans:
            spans.append(span)
    return spans[:MOST_IDENTIFIERS]


# Negatives ----------------------------------------------------------------------


def _negatives(corpus: Corpus, drafts: list[Draft], wanted: int, seed: int, ids: set[str],
               used: set[str]) -> list[Draft]:
    """About half with a key term swapped for a word the docs never use, half about a product they never name."""
    if wanted <= 0 or not drafts:
        return []
    text = "\n".join(section.text.lower() for section in corpus.sections.values())
    text += "\n" + "\n".join(page.title.lower() for page in corpus.pages.values())
    fakes = [term for term in _FAKE_TERMS if term not in text]
    products = sorted((p for p in _PRODUCTS if p.lower() not in text), key=lambda p: draft_key(seed, p))
    bases = sorted(drafts, key=lambda d: draft_key(seed, f"negative\0{d.id}"))
    made: list[Draft] = []
    for n, base in enumerate(bases):
        if len(made) >= wanted:
            break
        if n % 2 == 0 and fakes:
            question, origin = _swapped(base, fakes[len(made) % len(fakes)]), "template:negative-swapped-term"
        elif products:
            product = products[len(made) % len(products)]
            question, origin = _unnamed_product(corpus, base, product), "template:negative-unnamed-product"
        else:
            continue
        if question is None or question.lower() in used:
            continue
        used.add(question.lower())
        made.append(Draft(
            id=unique_id(_slug(f"neg-{base.id.removeprefix('neg-')}"), ids), question=question, gold=(),
            gold_answer=None, identifiers=(), split=page_split(base.gold[0].partition("#")[0]) if base.gold else "dev",
            origin=origin, tags=(DRAFT_TAG, "negative", CHECK_TAG), expected_cause="not-answerable",
        ))
    return made


def _swapped(base: Draft, fake: str) -> str | None:
    """The base question with its key term (its first code span, else its longest word) swapped for ``fake``."""
    span = CODE_SPAN.search(base.question)
    if span:
        term = span.group(1)
        made = ("--" + fake) if term.startswith("-") else (fake + "_mode" if "_" in term else fake)
        return base.question.replace(f"`{term}`", f"`{made}`", 1)
    content = sorted(words(base.question), key=lambda word: (-len(word), word))
    if not content:
        return None
    found = re.search(rf"\b{re.escape(content[0])}\b", base.question, re.IGNORECASE)
    if found is None:
        return None
    return base.question[: found.start()] + fake + base.question[found.end():]


def _unnamed_product(corpus: Corpus, base: Draft, product: str) -> str:
    page = corpus.pages[base.gold[0].partition("#")[0]]
    return f"How do I set up {page.title} on {product}?"


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "draft"
    return slug[:60].rstrip("-")


