"""Coverage gaps: the questions the assistant did not answer well, grouped into pages to write or fix.

A turn shows a gap when it was refused, answered without a citation, or asked something
no section of the docs is near (its evidence is below ``near_evidence``). Gap
turns are grouped:

- by their nearest page, when a section of the docs is near the question: the docs hold
  something, and the assistant refused or cited nothing — **a page the assistant missed**;
- by shared words, when no section is near: a greedy cover, largest first — the word the
  most remaining asks share (of those in at most ``_COMMON_IN_DOCS`` of the docs' chunks,
  so the product's own name does not glue every question together) takes every remaining
  question holding it; a question that shares no such word with another stands alone.
  The docs hold nothing near these — **a page to write**.

Groups rank by how many turns asked them. Memory is bounded: a page group keeps its
``_KEPT`` most asked questions, and at most ``_FAR_QUESTIONS`` distinct far questions
are held for the word grouping (past it, further new ones are counted, not grouped).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from docpilot.field.turns import FieldTurn
from docpilot.retrieval.tokens import terms, words

__all__ = ["GapFinder", "MISSED", "TO_WRITE"]

TO_WRITE = "page to write"
MISSED = "page the assistant missed"
_KEPT = 50
_SHOWN = 20
_FAR_QUESTIONS = 50_000
_COMMON_IN_DOCS = 0.05


@dataclass
class _Group:
    asks: int = 0
    questions: Counter = field(default_factory=Counter)
    sections: dict[str, float] = field(default_factory=dict)
    reasons: Counter = field(default_factory=Counter)

    def add(self, question: str, asks: int, turn_sections: list[tuple[str, float]], reasons: Counter) -> None:
        self.asks += asks
        if question in self.questions or len(self.questions) < _KEPT:
            self.questions[question] += asks
        for section, score in turn_sections:
            self.sections[section] = max(score, self.sections.get(section, float("-inf")))
        self.reasons.update(reasons)


class GapFinder:
    """Collects gap turns as the log streams, and groups them at the end."""

    def __init__(self, chunk_texts: list[str]) -> None:
        counts: Counter = Counter()
        for text in chunk_texts:
            counts.update(set(terms(text)))
        limit = _COMMON_IN_DOCS * max(len(chunk_texts), 1)
        self._common = frozenset(t for t, c in counts.items() if c > limit)
        self._pages: dict[str, _Group] = {}
        # A far question's [asks, refused, uncited, low-evidence, nearest hits]: plain numbers and the
        # ranking's own list of hits, shared with the scorer's, since there may be 50,000 of them.
        self._far: dict[str, list] = {}
        self.far_overflow = 0
        """Far questions past the bound, counted in no group."""

    def add(self, turn: FieldTurn) -> None:
        """Take one scored turn; only a gap turn is kept."""
        if not turn.gap:
            return
        row = turn.row
        if turn.near:
            reasons = Counter({"refused": row.refused, "uncited": turn.uncited, "low_evidence": not turn.near})
            sections = [(h.section_id, h.score) for h in turn.nearest]
            page = turn.nearest[0].section_id.partition("#")[0]
            self._pages.setdefault(page, _Group()).add(row.question, 1, sections, reasons)
            return
        kept = self._far.get(row.question)
        if kept is None:
            if len(self._far) >= _FAR_QUESTIONS:
                self.far_overflow += 1
                return
            kept = self._far[row.question] = [0, 0, 0, 0, turn.nearest]
        kept[0] += 1
        kept[1] += row.refused
        kept[2] += turn.uncited
        kept[3] += not turn.near

    def merge(self, other: GapFinder) -> None:
        """Take the gap turns another finder kept (a later part of the same log), as if added here."""
        for page, group in other._pages.items():
            mine = self._pages.setdefault(page, _Group())
            mine.asks += group.asks
            for question, asks in group.questions.items():
                if question in mine.questions or len(mine.questions) < _KEPT:
                    mine.questions[question] += asks
            for section, score in group.sections.items():
                mine.sections[section] = max(score, mine.sections.get(section, float("-inf")))
            mine.reasons.update(group.reasons)
        for question, theirs in other._far.items():
            kept = self._far.get(question)
            if kept is None:
                if len(self._far) >= _FAR_QUESTIONS:
                    self.far_overflow += theirs[0]
                    continue
                kept = self._far[question] = [0, 0, 0, 0, theirs[4]]
            for i in range(4):
                kept[i] += theirs[i]
        self.far_overflow += other.far_overflow

    def groups(self) -> list[dict[str, Any]]:
        """Every group, most asked first: its verdict, questions, nearest sections and why its turns count."""
        found = [_described(page, "page", page, group, MISSED) for page, group in self._pages.items()]
        for label, group in self._by_words():
            found.append(_described(label, "words", label, group, TO_WRITE))
        found.sort(key=lambda g: (-g["asks"], g["key"]))
        for rank, group in enumerate(found, start=1):
            group["rank"] = rank
        return found

    def _by_words(self) -> list[tuple[str, _Group]]:
        """The far questions as a greedy cover by shared words, the word shared by most asks first."""
        keys = {q: {t for t in terms(q) if t not in self._common} for q in self._far}
        left = set(self._far)
        out: list[tuple[str, _Group]] = []
        while left:
            shared: Counter = Counter()
            for question in left:
                for term in keys[question]:
                    shared[term] += self._far[question][0]
            lead = min(shared.items(), key=lambda kv: (-kv[1], kv[0]), default=None)
            members = sorted(q for q in left if lead and lead[0] in keys[q])
            if lead is None or len(members) < 2:
                out += [(q, self._group([q])) for q in sorted(left)]
                break
            out.append((self._label(members, lead[0]), self._group(members)))
            left -= set(members)
        return out

    def _group(self, members: list[str]) -> _Group:
        group = _Group()
        for question in members:
            asks, refused, uncited, low, hits = self._far[question]
            reasons = Counter({"refused": refused, "uncited": uncited, "low_evidence": low})
            group.add(question, asks, [(h.section_id, h.score) for h in hits], reasons)
        return group

    def _label(self, members: list[str], lead: str) -> str:
        """The group's name: its most shared words, as written, the lead word first."""
        seen: Counter = Counter()
        stems: dict[str, Counter] = {}
        stem_of: dict[str, str] = {}
        for question in members:
            for word in set(words(question)):
                stem = stem_of.get(word)
                if stem is None:
                    stem = stem_of[word] = (terms(word) or [word])[0]
                if stem in self._common:
                    continue
                seen[stem] += self._far[question][0]
                stems.setdefault(stem, Counter())[word] += 1
        top = [lead] + [s for s, c in seen.most_common(4) if s != lead and c * 2 >= seen[lead]][:2]
        return " ".join(stems[s].most_common(1)[0][0] if s in stems else s for s in top)


def _described(key: str, kind: str, label: str, group: _Group, verdict: str) -> dict[str, Any]:
    nearest = sorted(group.sections.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return {
        "key": f"{kind}:{key}",
        "by": kind,
        "label": label,
        "verdict": verdict,
        "asks": group.asks,
        "distinct_questions": len(group.questions),
        "questions": [{"question": q, "asks": n} for q, n in
                      sorted(group.questions.items(), key=lambda kv: (-kv[1], kv[0]))[:_SHOWN]],
        "nearest": [{"section": s, "score": round(score, 6)} for s, score in nearest],
        "reasons": {r: group.reasons.get(r, 0) for r in ("refused", "uncited", "low_evidence")},
    }
