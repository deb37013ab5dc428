"""The lock beside a golden set: what the docs said under each record's gold when a person last read it.

A golden set is written once and the docs move every week. The lock (``golden.lock``
beside ``golden.yaml``: the set's path with the suffix ``.lock``) keeps, for every
record with gold, what each gold entry covered when the record was locked:

- the **digest** of the text it covers (white space folded, so re-wrapping a line
  changes nothing, and headings left out, so a renamed heading keeps its text's
  digest and can be found again under its new anchor);
- the **heading path** it had (the page title for a page entry);
- for an entry pinning one section (``page#anchor``, ``page#(top)``), that section's
  **text**, so a change can be shown word by word; for a page entry (``page``,
  ``page#``), the digest of each **section** it covered, so a page that gained or lost
  sections can be told from one whose text changed;

and, for a record with a gold answer, which of its **identifiers** and what share of
its **answer words** the gold text held. ``docpilot.golden.staleness`` compares a lock
with the docs as they are now; ``docpilot.drafting.locking`` writes it.

The file is JSON, one record after another in the set's order, so a reviewer reads
its diff beside the docs' diff: a docs change under the gold shows as a change of a
locked text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from docpilot.errors import InputError
from docpilot.golden.templates import words
from docpilot.metrics.gold import TOP, is_under
from docpilot.userfiles.intake import FileKind, MiB, read_text

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus, Section
    from docpilot.schema import GoldenRecord

LOCK_FILE = FileKind("golden lock", 64 * MiB, "check that the path names a lock written by `docpilot golden lock`")
_RELOCK = "run `docpilot golden lock` to write it again from the docs as they are now"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LockedEntry(_Strict):
    """What one gold entry covered when its record was locked."""

    heading_path: list[str]
    """The section's heading path (page title first); a page entry's page title."""
    digest: str
    """Digest of the text the entry covers, white space folded, headings left out."""
    text: str | None = None
    """An entry pinning one section: that section's text, white space folded (for the word diff)."""
    sections: dict[str, str] | None = None
    """A page entry: each section it covered, by id, with the digest of its text."""


class LockedRecord(_Strict):
    """One record's gold as it was locked."""

    gold: dict[str, LockedEntry]
    """Each gold entry of the record, as the record names it, with what it covered."""
    identifiers: dict[str, bool] = Field(default_factory=dict)
    """Each identifier of the record, and whether the gold text held it verbatim."""
    answer_words: float | None = None
    """Share of the gold answer's content words the gold text held; None without a gold answer."""


class GoldLock(_Strict):
    """The lock of one golden set."""

    version: Literal[1] = 1
    """Version of the lock's format."""
    records: dict[str, LockedRecord] = Field(default_factory=dict)
    """Locked records by id, in the set's order; negatives are not locked (they have no gold)."""


def folded(text: str) -> str:
    """A text with its white space folded to single spaces: what a digest is taken of."""
    return " ".join(text.split())


def text_digest(text: str) -> str:
    """The digest of a section's text, white space folded: a change of its words changes it."""
    return "sha256:" + hashlib.sha256(folded(text).encode("utf-8")).hexdigest()[:16]


def pins_section(entry: str) -> bool:
    """Whether a gold entry pins one section (``page#anchor`` or ``page#(top)``) rather than a page."""
    return bool(entry.partition("#")[2])


def entry_section_id(entry: str) -> str:
    """The section id an entry pinning one section names (``page#(top)`` is the section ``page#``)."""
    page, _, anchor = entry.partition("#")
    return f"{page}#" if anchor == TOP else entry


def section_entry(section: Section) -> str:
    """The gold entry that pins ``section``: its id, or ``page#(top)`` for the text above the first heading."""
    return section.id if section.anchor else f"{section.page_id}#{TOP}"


def covered_sections(entry: str, corpus: Corpus) -> list[Section]:
    """The sections a gold entry covers in ``corpus``, in docs order; empty when it names nothing there."""
    if pins_section(entry):
        section = corpus.sections.get(entry_section_id(entry))
        return [section] if section is not None else []
    page_id, hash_, _ = entry.partition("#")
    if hash_:
        page = corpus.pages.get(page_id)
        return list(page.sections) if page is not None else []
    return [s for pid, page in corpus.pages.items() if is_under(pid, page_id) for s in page.sections]


def lock_entry(entry: str, corpus: Corpus) -> LockedEntry | None:
    """What ``entry`` covers in ``corpus`` now; None when it names nothing there."""
    sections = covered_sections(entry, corpus)
    if not sections:
        return None
    if pins_section(entry):
        section = sections[0]
        return LockedEntry(heading_path=list(section.heading_path), digest=text_digest(section.text),
                           text=folded(section.text))
    digests = {s.id: text_digest(s.text) for s in sections}
    page = corpus.pages[sections[0].page_id]
    return LockedEntry(heading_path=[page.title], digest=pages_digest(digests.values()), sections=digests)


def pages_digest(digests: Iterable[str]) -> str:
    """The digest of a page entry: of its sections' digests in order."""
    return "sha256:" + hashlib.sha256("\n".join(digests).encode("utf-8")).hexdigest()[:16]


def gold_text(sections: Iterable[Section]) -> str:
    """The text a record's gold covers, headings included: where its identifiers and answer words are looked for."""
    return "\n".join(f"{s.title}\n{s.text}" for s in sections)


def answer_words_found(answer: str | None, text: str) -> float | None:
    """Share of the gold answer's distinct content words that ``text`` holds; None without a content word."""
    wanted = set(words(answer or ""))
    if not wanted:
        return None
    return round(len(wanted & set(words(text))) / len(wanted), 2)


def lock_record(record: GoldenRecord, corpus: Corpus) -> LockedRecord | None:
    """What the record's gold covers now; None for a negative, or when an entry names nothing in the docs."""
    gold: dict[str, LockedEntry] = {}
    sections: dict[str, Section] = {}
    for entry in dict.fromkeys(record.gold):
        locked = lock_entry(entry, corpus)
        if locked is None:
            return None
        gold[entry] = locked
        sections.update((s.id, s) for s in covered_sections(entry, corpus))
    if not gold:
        return None
    text = gold_text(sections.values())
    return LockedRecord(gold=gold, identifiers={i: i in text for i in record.identifiers},
                        answer_words=answer_words_found(record.gold_answer, text))


def build_lock(records: Sequence[GoldenRecord], corpus: Corpus, *, keep: GoldLock | None = None,
               only: set[str] | None = None) -> GoldLock:
    """The lock of ``records`` over ``corpus``, in the records' order.

    With ``only``, only those records are locked afresh; every other record keeps its
    entry from ``keep`` (and stays out when it has none). Records no longer in the set
    leave the lock.
    """
    kept = keep.records if keep is not None else {}
    locked: dict[str, LockedRecord] = {}
    for record in records:
        if only is not None and record.id not in only:
            if record.id in kept:
                locked[record.id] = kept[record.id]
            continue
        entry = lock_record(record, corpus)
        if entry is not None:
            locked[record.id] = entry
    return GoldLock(records=locked)


def lock_text(lock: GoldLock) -> str:
    """The lock as its file holds it: indented JSON, keys in a fixed order, a line end at the end."""
    return json.dumps(lock.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False) + "\n"


def read_lock(path: str | Path) -> GoldLock:
    """The lock at ``path``; InputError naming the file, the line and the fix when it is no lock."""
    path = Path(path)
    text = read_text(path, LOCK_FILE)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"is not a golden lock: {exc.msg}", path=path, line=exc.lineno,
                         hint=f"a merge may have left conflict marks in it; {_RELOCK}") from None
    try:
        return GoldLock.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise InputError(f"is not a golden lock: {where}: {first['msg']}", path=path,
                         record=_record_of(first["loc"]), hint=_RELOCK) from None


def _record_of(loc: Sequence[object]) -> str | None:
    return str(loc[1]) if len(loc) > 1 and loc[0] == "records" else None
