"""What became of a golden set's gold since it was locked: moved, changed, gone, widened or narrowed.

Each locked gold entry (``docpilot.golden.lock``) is compared with the docs as they
are now, and takes one state:

==========  ==========================================================================
``ok``      it covers the same text as when it was locked
``moved``   an entry pinning one section names nothing now, and exactly one section
            carries its text: a renamed heading (new anchor) or a section moved to
            another page; the finding names the new entry, which ``--fix`` writes
``changed`` it names a section (or page) whose text differs: a word diff, and whether
            the gold answer's identifiers are still there, say how much
``gone``    it names nothing now and no section carries its text (removed, or renamed
            and rewritten at once: a person must look)
``narrowed`` a page entry whose page lost sections (removed, or moved to another page
            when the page was split)
``widened`` a page entry whose page gained sections
==========  ==========================================================================

A record takes the worst state of its entries, in the order gone, moved, changed,
narrowed, widened. The first three are *stale*: the record is scored against gold that
is not where, or not what, it was, so a run marks its row (``Row.gold_state``, through
``docpilot.golden.gold_state``, which loads this module only when there is a lock) and
``improve`` gives it the cause ``stale-gold`` before any retrieval cause. A widened or
narrowed page entry still matches what it names; ``golden check`` tells it, runs do not.

A record the lock does not hold, or whose gold lists an entry the lock does not, is
*unlocked*: nothing can be said of it until ``golden lock`` adds it.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from docpilot.golden.lock import (
    GoldLock,
    LockedEntry,
    LockedRecord,
    answer_words_found,
    covered_sections,
    entry_section_id,
    folded,
    gold_text,
    pins_section,
    section_entry,
    text_digest,
)
from docpilot.golden.templates import words

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus, Section
    from docpilot.schema import GoldenRecord

State = Literal["ok", "moved", "changed", "gone", "narrowed", "widened"]
STALE: tuple[State, ...] = ("gone", "moved", "changed")
"""The states a run marks in a row's ``gold_state``, worst first."""
_WORST_FIRST: tuple[State, ...] = ("gone", "moved", "changed", "narrowed", "widened", "ok")
_DIFF_HUNKS = 3
_DIFF_WORDS = 8
_NEAREST = 0.5  # share of a gone section's words another section must hold to be named as the nearest


@dataclass(frozen=True)
class EntryFinding:
    """What became of one locked gold entry."""

    entry: str
    """The gold entry as the record names it."""
    state: State
    """Its state (the module's table)."""
    moved_to: str | None = None
    """``moved``: the entry that now carries its text."""
    was: tuple[str, ...] = ()
    """The heading path it had when locked."""
    now: tuple[str, ...] = ()
    """The heading path of what carries it now (moved or changed); empty when gone."""
    diff: str | None = None
    """``changed`` (one section): the words removed ``[-…-]`` and added ``{+…+}``, a few hunks."""
    sections: dict[str, list[str]] = field(default_factory=dict)
    """A page entry: ``changed``, ``lost`` and ``gained`` section ids, and ``moved-out`` ones as ``old → new``."""
    note: str | None = None
    """What else a person should know: where the nearest text is, why a move is not certain."""

    def describe(self) -> str:
        """The finding in one line, as ``golden check`` prints it."""
        if self.state == "moved":
            return f"{self.entry} → {self.moved_to} ({_path(self.was)} is now {_path(self.now)})"
        parts = [self.entry]
        if self.diff:
            parts.append(self.diff)
        parts += [f"{kind} {', '.join(ids)}" for kind, ids in self.sections.items() if ids]
        if self.note:
            parts.append(self.note)
        return ": ".join(parts[:1]) + (": " + "; ".join(parts[1:]) if len(parts) > 1 else "")


@dataclass(frozen=True)
class RecordFinding:
    """What became of one record's gold since it was locked."""

    id: str
    """The record's id."""
    state: State | Literal["unlocked"]
    """The worst state of its entries; ``unlocked`` when the lock does not hold all of its gold."""
    entries: list[EntryFinding] = field(default_factory=list)
    """Each locked entry's finding, in the record's order (unlocked entries left out)."""
    unlocked: list[str] = field(default_factory=list)
    """Gold entries of the record that the lock does not hold."""
    identifiers_lost: list[str] = field(default_factory=list)
    """Identifiers the gold text held when locked and holds no more."""
    identifiers_kept: list[str] = field(default_factory=list)
    """Identifiers the gold text held when locked and still holds."""
    answer_words: tuple[float | None, float | None] = (None, None)
    """Share of the gold answer's words the gold text held when locked, and holds now."""

    @property
    def stale(self) -> bool:
        """Whether a run marks the record: its gold moved, changed or is gone."""
        return self.state in STALE

    @property
    def moves(self) -> dict[str, str]:
        """The record's moved entries: old entry → the one that carries its text now."""
        return {f.entry: f.moved_to for f in self.entries if f.state == "moved" and f.moved_to}

    def answer_line(self) -> str | None:
        """Whether the gold answer still stands on the text: its identifiers and words, locked → now."""
        parts = []
        if self.identifiers_lost:
            parts.append(f"identifiers gone from the gold text: {', '.join(self.identifiers_lost)}")
        elif self.identifiers_kept:
            parts.append(f"identifiers still there: {', '.join(self.identifiers_kept)}")
        before, now = self.answer_words
        if before is not None and now is not None:
            parts.append(f"gold answer's words in the gold text {before:.2f} → {now:.2f}" if now != before
                         else f"gold answer's words in the gold text {now:.2f}, as locked")
        return "; ".join(parts) or None

    def as_json(self) -> dict:
        """The finding as plain JSON-ready data."""
        return {"id": self.id, "state": self.state, "unlocked": self.unlocked,
                "entries": [{"entry": f.entry, "state": f.state, "moved_to": f.moved_to, "was": list(f.was),
                             "now": list(f.now), "diff": f.diff, "sections": f.sections, "note": f.note}
                            for f in self.entries],
                "identifiers_lost": self.identifiers_lost, "identifiers_kept": self.identifiers_kept,
                "answer_words": {"locked": self.answer_words[0], "now": self.answer_words[1]}}


class _Texts:
    """The corpus's sections by the digest of their text, worked out the first time a move is looked for."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._by_digest: dict[str, list[Section]] | None = None
        self._digests: dict[str, str] = {}

    def digest(self, section: Section) -> str:
        known = self._digests.get(section.id)
        if known is None:
            known = self._digests[section.id] = text_digest(section.text)
        return known

    def carrying(self, digest: str) -> list[Section]:
        """Every section whose text has ``digest``, in docs order."""
        if self._by_digest is None:
            self._by_digest = {}
            for section in self.corpus.sections.values():
                self._by_digest.setdefault(self.digest(section), []).append(section)
        return self._by_digest.get(digest, [])


def find_stale(lock: GoldLock, records: Sequence[GoldenRecord], corpus: Corpus) -> list[RecordFinding]:
    """What became of each record's gold since ``lock`` was written, in the records' order (negatives left out)."""
    texts = _Texts(corpus)
    return [_record_finding(record, lock.records.get(record.id), texts) for record in records if record.gold]


# One record ------------------------------------------------------------------------


def _record_finding(record: GoldenRecord, locked: LockedRecord | None, texts: _Texts) -> RecordFinding:
    unlocked = [e for e in dict.fromkeys(record.gold) if locked is None or e not in locked.gold]
    if locked is None:
        return RecordFinding(id=record.id, state="unlocked", unlocked=unlocked)
    entries = [_entry_finding(e, locked.gold[e], texts) for e in dict.fromkeys(record.gold) if e in locked.gold]
    state = next(s for s in _WORST_FIRST if s == "ok" or any(f.state == s for f in entries))
    if unlocked and state == "ok":
        return RecordFinding(id=record.id, state="unlocked", entries=entries, unlocked=unlocked)
    sections = {s.id: s for e in record.gold for s in covered_sections(e, texts.corpus)}
    now = gold_text(sections.values())
    kept = [i for i, found in locked.identifiers.items() if found and i in now]
    lost = [i for i, found in locked.identifiers.items() if found and i not in now]
    return RecordFinding(id=record.id, state=state, entries=entries, unlocked=unlocked, identifiers_lost=lost,
                         identifiers_kept=kept,
                         answer_words=(locked.answer_words, answer_words_found(record.gold_answer, now)))


def _entry_finding(entry: str, locked: LockedEntry, texts: _Texts) -> EntryFinding:
    if pins_section(entry):
        return _section_finding(entry, locked, texts)
    return _page_finding(entry, locked, texts)


def _section_finding(entry: str, locked: LockedEntry, texts: _Texts) -> EntryFinding:
    was = tuple(locked.heading_path)
    section = texts.corpus.sections.get(entry_section_id(entry))
    if section is not None:
        if texts.digest(section) == locked.digest:
            return EntryFinding(entry, "ok", was=was, now=section.heading_path)
        return EntryFinding(entry, "changed", was=was, now=section.heading_path,
                            diff=word_diff(locked.text or "", folded(section.text)))
    carriers = texts.carrying(locked.digest)
    moved, note = _one_carrier(entry, was, carriers)
    if moved is not None:
        return EntryFinding(entry, "moved", moved_to=section_entry(moved), was=was, now=moved.heading_path)
    return EntryFinding(entry, "gone", was=was, note=note or _nearest(locked.text or "", texts.corpus))


def _one_carrier(entry: str, was: tuple[str, ...], carriers: list[Section]) -> tuple[Section | None, str | None]:
    """The one section a moved entry's text is under now, or why there is none to name for sure."""
    if len(carriers) == 1:
        return carriers[0], None
    if not carriers:
        return None, None
    page = entry.partition("#")[0]
    for narrowed in ([s for s in carriers if s.page_id == page],
                     [s for s in carriers if was and s.title == was[-1]]):
        if len(narrowed) == 1:
            return narrowed[0], None
    shown = ", ".join(section_entry(s) for s in carriers[:5])
    return None, f"its text is under {len(carriers)} sections ({shown}): pin the one that answers by hand"


def _nearest(text: str, corpus: Corpus) -> str | None:
    """Where the text most like a gone section's is now, when some section holds most of its words."""
    wanted = set(words(text))
    if not wanted:
        return None
    best, share = None, 0.0
    for section in corpus.sections.values():
        found = len(wanted & set(words(section.text))) / len(wanted)
        if found > share:
            best, share = section, found
    if best is None or share < _NEAREST:
        return "no section carries its text"
    return f"no section carries its text; the nearest is {section_entry(best)} ({share:.2f} of its words)"


def _page_finding(entry: str, locked: LockedEntry, texts: _Texts) -> EntryFinding:
    was = tuple(locked.heading_path)
    before = locked.sections or {}
    sections = covered_sections(entry, texts.corpus)
    if not sections:
        return _page_gone(entry, locked, texts)
    now = {s.id: texts.digest(s) for s in sections}
    heading = (texts.corpus.pages[sections[0].page_id].title,)
    if now == before:
        return EntryFinding(entry, "ok", was=was, now=heading)
    kept_texts, old_texts = set(now.values()), set(before.values())
    changed = [sid for sid, digest in now.items() if sid in before and before[sid] != digest]
    gained = [sid for sid, digest in now.items() if sid not in before and digest not in old_texts]
    lost, moved_out = [], []
    for sid, digest in before.items():
        if sid in now or digest in kept_texts:
            continue
        carriers = texts.carrying(digest)
        if len(carriers) == 1:  # a page split: the section lives on under another page
            moved_out.append(f"{sid} → {section_entry(carriers[0])}")
        else:
            lost.append(sid)
    found = {"changed": changed, "lost": lost, "moved-out": moved_out, "gained": gained}
    state: State = "changed" if changed else "narrowed" if lost or moved_out else "widened" if gained else "ok"
    return EntryFinding(entry, state, was=was, now=heading, sections={k: v for k, v in found.items() if v})


def _page_gone(entry: str, locked: LockedEntry, texts: _Texts) -> EntryFinding:
    """A page entry that names nothing now: moved when another page entry covers exactly its sections' texts."""
    was = tuple(locked.heading_path)
    before = Counter((locked.sections or {}).values())
    pages = sorted({s.page_id for digest in before for s in texts.carrying(digest)})
    for page_id in pages:
        target = f"{page_id}#" if "#" in entry else page_id
        covered = covered_sections(target, texts.corpus)
        if Counter(texts.digest(s) for s in covered) == before:
            return EntryFinding(entry, "moved", moved_to=target, was=was,
                                now=(texts.corpus.pages[page_id].title,))
    note = f"its sections' texts are now on {', '.join(pages[:5])}" if pages else "no page carries its text"
    return EntryFinding(entry, "gone", was=was, note=note)


def word_diff(old: str, new: str) -> str:
    """A short word diff: the first few hunks, each ``[-removed-] {+added+}``, long runs of words cut."""
    a, b = old.split(), new.split()
    hunks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        parts = ([f"[-{_clipped(a[i1:i2])}-]"] if i2 > i1 else []) + ([f"{{+{_clipped(b[j1:j2])}+}}"] if j2 > j1 else [])
        hunks.append(" ".join(parts))
    if not hunks:
        return "white space only"
    more = len(hunks) - _DIFF_HUNKS
    return " … ".join(hunks[:_DIFF_HUNKS]) + (f" (and {more} more change{'s' if more > 1 else ''})" if more > 0 else "")


def _clipped(run: list[str]) -> str:
    if len(run) <= _DIFF_WORDS:
        return " ".join(run)
    half = _DIFF_WORDS // 2
    return " ".join(run[:half]) + f" …{len(run) - _DIFF_WORDS} words… " + " ".join(run[-half:])


def _path(path: Sequence[str]) -> str:
    return " › ".join(path) if path else "(nothing)"
