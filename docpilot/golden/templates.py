"""Questions from the docs' structure: which sections can be drafted from, and the questions templates make.

A section is *eligible* when it has prose to answer from: not an empty heading, not
code alone, not a page of generated API reference (most of its sections open with a
code block: a signature, a usage line), at least ``MIN_PROSE_WORDS`` words of prose,
and a sentence fit to be a reference answer. Its templates: the heading ("How do I
…?", "What is …?"), a definition sentence ("X is a …"), a list item or table row that
names an option, flag or setting ("What does `--flag` do?", "What is the default of
`key`?"), and a sentence naming a default. Each question keeps the sentence (list
item, table row) it was drawn from, which must appear in the section as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from docpilot.corpus.outline import without_admonition_titles
from docpilot.metrics.gold import TOP

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus, Page, Section

MIN_PROSE_WORDS = 12
"""Words of prose (code left out) a section needs to be drafted from."""
_WORD = re.compile(r"[^\W_][\w]*")
# Words that carry no topic, left out when a heading's or question's words are counted.
_FILLER = frozenset("""a an and are as at be by for how i in is it of on or the to what when where which who why
    with do does can my your this that""".split())
_ANSWER_WORDS = (6, 60)
_SHORT_ANSWER_WORDS = 3  # a list item, a table row or a default: "Defaults to `60`." is a whole answer
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"`([^`\n]{1,40})`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"(*])")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.+)$")
_KEYED_ITEM = re.compile(r"^(?:\*\*)?`(?P<key>[^`\n]{1,40})`(?:\*\*)?\s*(?::|—|–| - )\s*(?P<desc>\S.*)$")
_DEFINITION = re.compile(
    r"^(?:(?:An?|The)\s+)?(?P<term>`[^`]{1,40}`|[A-Z][\w.-]*(?:\s[\w.-]+){0,3})\s+(?P<verb>is|are)\s+"
    r"(?:an?|the|used|responsible|how|what|where|when)\b"
)
_DEFAULT = re.compile(r"\b(?:[Dd]efaults?\s+(?:to|is)|default value)\b")
_STEP = re.compile(r"^(?:step\s+\d+[.:]?|\d+[.)])\s*", re.IGNORECASE)
_IDENTIFIER_HEADING = re.compile(r"^[\w.\-]+$")
_QUESTION_WORDS = frozenset("how what where when why which who can should".split())
_ARTICLES = frozenset("the a an your our my all every some no not".split())
_KEYED_DEFAULT = re.compile(r"`([^`\n]{1,40})`[^`.]{0,40}?\bdefaults\s+to\b")
_PRONOUNS = frozenset("this it that there here these those you we they which what each one its".split())
_GENERIC_HEADINGS = frozenset(
    phrase.strip() for phrase in """overview|introduction|summary|conclusion|example|examples|prerequisites|requirements|next steps|see also|
    further reading|resources|usage|notes|background|reference|details|setup|options|parameters|arguments|returns|
    troubleshooting|faq|installation|getting started|learn more|related|before you begin|what's next""".split("|")
)
_HOW_VERBS = frozenset(
    """access add allow apply emit fetch invoke authenticate avoid build cache call cancel change check choose clean configure
    connect control convert create customize debug define delete deploy disable enable ensure export extend
    filter find generate get give handle hide import include inspect install integrate keep limit list load
    log make manage map migrate monitor mount move override pass pause persist pin prevent protect publish
    pull push read receive register reload remove rename replace report require reset restart restore resume
    retry return reuse rotate run save scale schedule secure select send serve set share show skip specify
    start stop store stream submit switch sync test track trigger troubleshoot turn understand update upgrade
    upload use validate verify view wait watch work write""".split()
)



@dataclass(frozen=True)
class LeftOut:
    """A page or section that got no draft, and why."""

    id: str
    reason: str


@dataclass(frozen=True)
class Candidate:
    """A question a template made from a section, with the answer it was drawn from."""

    template: str
    question: str
    answer: str


# Eligibility --------------------------------------------------------------------


def eligible_sections(corpus: Corpus) -> tuple[dict[str, list[tuple[Section, list[Candidate]]]], list[LeftOut]]:
    """Page id → its eligible sections with their candidate questions; and what was left out, and why."""
    eligible: dict[str, list[tuple[Section, list[Candidate]]]] = {}
    left_out = []
    for page_id, page in corpus.pages.items():
        if _generated(page):
            left_out.append(LeftOut(page_id, f"generated API reference ({len(page.sections)} sections)"))
            continue
        for section in page.sections:
            reason, candidates = _section_candidates(page, section)
            if reason:
                left_out.append(LeftOut(pin(section), reason))
            else:
                eligible.setdefault(page_id, []).append((section, candidates))
    return eligible, left_out


def _generated(page: Page) -> bool:
    """A page of generated reference: most of its titled sections open with a code block (a signature, a usage)."""
    titled = [section for section in page.sections if section.level and section.text.strip()]
    stubs = sum(bool(_FENCE.match(section.text)) for section in titled)
    return bool(titled) and stubs >= 0.6 * len(titled)


def _section_candidates(page: Page, section: Section) -> tuple[str | None, list[Candidate]]:
    if not section.text.strip():
        return "empty heading", []
    prose = _prose(section.text)
    count = len(prose.split())
    if count == 0:
        return "code only", []
    if count < MIN_PROSE_WORDS:
        return f"too little prose ({count} words)", []
    candidates = [c for c in _candidates(page, section, prose) if answer_in_section(c.answer, section.text)]
    if not candidates:
        return "no sentence fit to be an answer", []
    return None, candidates


def _prose(text: str) -> str:
    """The section's text without its fenced code blocks and admonition titles."""
    kept, fence = [], None
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0]
        elif fence is not None:
            if opened and opened.group(1)[0] == fence and not line.strip().strip(fence):
                fence = None
        else:
            kept.append(line)
    return without_admonition_titles("\n".join(kept))


# Templates ----------------------------------------------------------------------


def _candidates(page: Page, section: Section, prose: str) -> list[Candidate]:
    units = _units(prose)
    sentences = [u for kind, u in units if kind == "sentence"]
    found = []
    first = next((s for s in sentences if _fit(s)), None)
    if first is not None:
        question = _heading_question(page, section)
        if question:
            found.append(Candidate("heading", question, first))
    for sentence in sentences:
        found += _sentence_candidates(section, sentence)
    for kind, unit in units:
        if kind == "item":
            found += _item_candidates(unit)
    found += _table_candidates(prose, section.title or page.title)
    return found


def _units(prose: str) -> list[tuple[str, str]]:
    """The prose as ("sentence" | "item", text) in order; table rows are read apart (``_table_candidates``)."""
    units: list[tuple[str, str]] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            joined = " ".join(" ".join(paragraph).split())
            units.extend(("sentence", s) for s in _SENTENCE_END.split(joined))
            paragraph.clear()

    for line in prose.split("\n"):
        stripped = line.strip()
        item = _LIST_ITEM.match(line)
        if not stripped or stripped.startswith(("|", "<", "#")):
            flush()
        elif item:
            flush()
            units.append(("item", item.group(1).strip()))
        else:
            paragraph.append(stripped)
    flush()
    return units


def _fit(sentence: str, least: int = _ANSWER_WORDS[0]) -> bool:
    """Whether a sentence can stand as a reference answer: whole, plain prose, of a readable length."""
    count = len(sentence.split())
    if not least <= count <= _ANSWER_WORDS[1] or not sentence.endswith((".", "!")):
        return False
    if sentence.endswith(("e.g.", "i.e.", "etc.")) or any(mark in sentence for mark in ("<", ">", "{", "}", "|")):
        return False
    return sentence[0].isupper() or sentence[0] in "`*\"("


def _heading_question(page: Page, section: Section) -> str | None:
    heading = _STEP.sub("", (section.title or page.title).strip()).rstrip(":.").strip()
    plain = heading.replace("`", "")
    if not plain or not words(plain):
        return None
    first, _, rest = heading.partition(" ")
    lead = first.lower()
    if heading.endswith("?") or lead in _QUESTION_WORDS:
        return heading.rstrip("?") + "?"
    if lead in _HOW_VERBS:
        return f"How do I {lead} {rest}?" if rest else f"{page.title}: how do I {lead}?"
    if plain.lower() in _GENERIC_HEADINGS and page.title != heading:
        return f"What {'are' if plain.endswith('s') else 'is'} the {plain.lower()} for {page.title}?"
    plural = plain.endswith("s") and not plain.endswith(("ss", "us", "is"))
    if lead.endswith("ed") and rest:  # "Measured on …": what is measured on …; "Unlinked answers": what are …
        return f"What {'are' if plural else 'is'} {lead} {rest}?"
    if lead.endswith("ing") and rest:
        return f"How does {lead} {rest} work?"
    if len(words(plain)) < 2 and not _IDENTIFIER_HEADING.match(plain) or lead in ("in", "on", "with", "for"):
        return f"What do the docs say about {heading} in {page.title}?"
    if _IDENTIFIER_HEADING.match(plain) and "`" not in heading and not (plain.isalpha() and plain[0].isupper()):
        heading = f"`{plain}`"
    elif lead in _ARTICLES:
        heading = lead + heading[len(first):]
    return f"What {'are' if plural else 'is'} {heading}?"


def _sentence_candidates(section: Section, sentence: str) -> list[Candidate]:
    found = []
    definition = _DEFINITION.match(sentence)
    if definition and _fit(sentence):
        term = definition.group("term")
        if term.strip("`").split()[0].lower() not in _PRONOUNS:
            found.append(Candidate("definition", f"What {definition.group('verb')} {term}?", sentence))
    if _DEFAULT.search(sentence) and _fit(sentence, _SHORT_ANSWER_WORDS):
        keyed = _KEYED_DEFAULT.search(sentence)
        key = _key_of(section.title) or (keyed.group(1) if keyed else None)
        if key:
            found.append(Candidate("default", f"What is the default of `{key}`?", sentence))
    return found


def _key_of(title: str) -> str | None:
    plain = title.replace("`", "").strip()
    return plain if plain and _IDENTIFIER_HEADING.match(plain) and not plain[0].isupper() else None


def _item_candidates(item: str) -> list[Candidate]:
    keyed = _KEYED_ITEM.match(item)
    if not keyed or len(keyed.group("desc").split()) < _SHORT_ANSWER_WORDS:
        return []
    key = keyed.group("key")
    if _DEFAULT.search(item):
        return [Candidate("default", f"What is the default of `{key}`?", item)]
    question = f"What does `{key}` do?" if key.startswith("-") else f"What is `{key}` for?"
    return [Candidate("option", question, item)]


def _table_candidates(prose: str, title: str) -> list[Candidate]:
    """Rows of a Markdown table whose first cell is a code span: an option, a flag, a setting."""
    found = []
    header: list[str] | None = None
    for line in prose.split("\n"):
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in stripped.strip("|").split("|")]
        if header is None:
            header = [cell.lower() for cell in cells]
            continue
        if all(set(cell) <= set("-: ") for cell in cells):
            continue
        key = re.fullmatch(r"`([^`]{1,40})`", cells[0])
        rest = " ".join(cells[1:])
        if not key or len(rest.split()) < _SHORT_ANSWER_WORDS:
            continue
        name = key.group(1).split()[0] if key.group(1).startswith("-") else key.group(1)
        answer = stripped.strip("|").strip()
        column = next((n for n, title in enumerate(header) if "default" in title), None)
        if column is not None and column < len(cells) and cells[column] not in ("", "-", "—"):
            found.append(Candidate("table-default", f"What is the default of `{name}`?", answer))
        else:
            question = f"What does `{name}` do?" if name.startswith("-") else f"What does `{name}` mean in {title}?"
            found.append(Candidate("table-row", question, answer))
    return found


def words(text: str) -> list[str]:
    """The content words of a text, lowercased: what a heading or a question is about."""
    return [w for w in _WORD.findall(text.lower()) if w not in _FILLER]


def pin(section: Section) -> str:
    """The gold entry that pins exactly this section."""
    return section.id if section.level or section.anchor else f"{section.page_id}#{TOP}"


def answer_in_section(answer: str, text: str) -> bool:
    """Whether the answer appears in the section's text, white space aside (the drafting rule)."""
    return " ".join(answer.split()) in " ".join(text.split())
