"""Scoring one logged turn without gold: the eval's own rules, read off what the log recorded.

A ``LoggedTurn`` becomes a ``docpilot.schema.Row`` the way a target's reply does in an
eval, so every number is the eval metric of the same name computed by the same function:

- its sources are read by the mapping (``targets.sources.source_name``) and placed in
  the docs by the same ``SourceResolver`` (a section, a page, or outside the docs);
- its answer is rendered against those sources by ``assistant.render.render_panel``,
  which says which markers (or listed citations) resolve, which are hallucinated, and
  how many working links the answer has;
- a refusal is what the log says (``refusal``), else DocPilot's own rule: an answer that
  starts with ``REFUSE: <cause>``, or a turn with no answer text;
- the question's language is detected (else the docs' language) and the answer's
  (an answer too short to tell is taken to be in the question's, as in an eval).

Then the retriever ranks the docs' sections for the question (the nearest, with the
retriever's scores). A fused retrieval score is relative to the question, so whether the
docs hold anything near it is read apart, as *evidence*: the share of the question's
words (stemmed, stop words dropped) that the nearest section holds, each weighted by its
inverse document frequency over the docs' chunks, ln(1 + N/df), a word the docs never
use weighing ln(1 + 2N):

    evidence = Σ_{t ∈ q ∩ section} idf(t) / Σ_{t ∈ q} idf(t)      (0 with no section or no words)

A question is *near* the docs when its evidence is at least ``near_evidence``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import jmespath

from docpilot.assistant.language import detect_language
from docpilot.assistant.render import Panel, render_panel
from docpilot.config.logs import LogMapping
from docpilot.field.log import LoggedTurn
from docpilot.models.base import Source, parse_refusal
from docpilot.retrieval.rankers import Hit, Retriever
from docpilot.retrieval.tokens import terms
from docpilot.schema import Row
from docpilot.targets.sources import SourceResolver, source_name

__all__ = ["NEAREST", "FieldTurn", "TurnScorer"]

NEAREST = 3
"""How many of the docs' sections nearest a question each turn keeps."""
_REMEMBERED = 50_000  # questions whose ranking is kept: logs ask the same questions again and again


@dataclass(slots=True)
class FieldTurn:
    """A scored turn: the row the metrics read, and what the docs hold near its question."""

    row: Row
    """The turn as an eval row (kind `positive`, no gold): the metrics' input."""
    line: int
    """The log line it came from."""
    turn: int
    """Its 1-based place in its conversation (1 when the log names none)."""
    conversation: str | None
    """The conversation id, as logged."""
    timestamp: str | None
    """When it happened, as logged."""
    nearest: list[Hit] = field(default_factory=list)
    """The docs' sections nearest the question, best first, by DocPilot's retriever."""
    evidence: float = 0.0
    """The idf-weighted share of the question's words the nearest section holds."""
    near: bool = False
    """Whether ``evidence`` reaches ``near_evidence``: the docs hold something near the question."""

    @property
    def uncited(self) -> bool:
        """An answer that cites no section the docs hold."""
        return self.row.answered and not self.row.citations

    @property
    def gap(self) -> bool:
        """Whether the turn shows a coverage gap: refused, uncited, or with no evidence near it."""
        return self.row.refused or self.uncited or not self.near

    def record(self) -> dict[str, Any]:
        """The turn as one line of the field rows file."""
        row = self.row
        return {
            "id": row.id, "line": self.line, "conversation": self.conversation, "turn": self.turn,
            "timestamp": self.timestamp, "question": row.question, "answer": row.answer,
            "sources": row.retrieved, "outside_docs": row.outside_docs, "citations": row.citations,
            "hallucinated": row.hallucinated, "links": row.links, "sources_shown": row.sources_shown,
            "refused": row.refused, "language": row.language, "answer_language": row.answer_language,
            "latency_ms": row.latency_ms, "first_token_ms": row.first_token_ms,
            "nearest": [{"section": h.section_id, "score": h.score} for h in self.nearest],
            "evidence": round(self.evidence, 6), "near": self.near, "gap": self.gap,
        }


class TurnScorer:
    """Scores logged turns against one corpus, its resolver and its retriever."""

    def __init__(self, mapping: LogMapping, resolver: SourceResolver, retriever: Retriever,
                 docs_language: str | None, base_url: str, idf: dict[str, float]) -> None:
        self.mapping = mapping
        self.resolver = resolver
        self.retriever = retriever
        self.docs_language = docs_language
        self.base_url = base_url
        self._rankings: OrderedDict[str, tuple[list[Hit], float]] = OrderedDict()
        self._panels: dict[tuple, tuple[Panel, str | None]] = {}
        self._turns: dict[str, int] = {}
        self._idf = idf
        self._unknown = math.log(1 + 2 * max(len(resolver.corpus.chunks), 1))
        self._section_terms: dict[str, frozenset[str]] = {}
        self._places: dict[str, tuple[str, bool]] = {}
        self._source_id = jmespath.compile(mapping.source_id)
        self.searches = 0
        """Rankings computed (not remembered), for the speed figure."""

    def score(self, logged: LoggedTurn) -> FieldTurn:
        """The scored turn for one logged turn."""
        row = self._row(logged)
        nearest, evidence = self.nearest(logged.question)
        number = 1
        if logged.conversation is not None:
            number = self._turns.get(logged.conversation, 0) + 1
            self._turns[logged.conversation] = number
        return FieldTurn(row=row, line=logged.line, turn=number, conversation=logged.conversation,
                         timestamp=logged.timestamp, nearest=nearest, evidence=evidence,
                         near=evidence >= self.mapping.near_evidence)

    def evidence(self, question: str, section_id: str) -> float:
        """The idf-weighted share of ``question``'s words that the section holds."""
        held = self._section_terms.get(section_id)
        if held is None:
            section = self.resolver.corpus.sections[section_id]
            held = frozenset(terms(" ".join([section.title, *section.heading_path, section.text])))
            self._section_terms[section_id] = held
        weights = {t: self._idf.get(t, self._unknown) for t in set(terms(question))}
        total = sum(weights.values())
        return sum(w for t, w in weights.items() if t in held) / total if total else 0.0

    def nearest(self, question: str) -> tuple[list[Hit], float]:
        """The docs' sections nearest ``question`` and its evidence, remembered for the questions asked most recently."""
        found = self._rankings.get(question)
        if found is not None:
            self._rankings.move_to_end(question)
            return found
        hits = self.retriever.search(question, k=NEAREST)
        self.searches += 1
        found = (hits, self.evidence(question, hits[0].section_id) if hits else 0.0)
        self._rankings[question] = found
        if len(self._rankings) > _REMEMBERED:
            self._rankings.popitem(last=False)
        return found

    def _row(self, logged: LoggedTurn) -> Row:
        sources, outside = self._sources(logged.sources)
        answer = logged.answer
        refused = logged.refused
        if refused is None:
            refused = not (answer or "").strip() or parse_refusal(answer or "") is not None
        language = detect_language(logged.question) or self.docs_language
        row: dict[str, Any] = {
            "id": logged.id, "kind": "positive", "split": "test", "question": logged.question,
            "retrieved": [s.section_id for s in sources], "primed": [s.section_id for s in sources],
            "outside_docs": outside, "answer": answer, "language": language, "refused": refused,
            "refused_by": "model" if refused else None, "refusal_cause": "not-answerable" if refused else None,
            "latency_ms": logged.latency_ms,
            "first_token_ms": None if refused else logged.first_token_ms,
        }
        if not refused and answer is not None:
            cited = None if logged.citations is None else [self._cited(c) for c in logged.citations]
            panel, answer_language = self._panel(answer, sources, cited)
            row.update(markers=panel.markers, citations=panel.citations, hallucinated=panel.hallucinated,
                       sources_shown=[s.section_id for s in panel.sources], links=panel.links,
                       answer_language=answer_language or language)
        return Row(**row)

    def _panel(self, answer: str, sources: list[Source], cited: list[str] | None) -> tuple[Panel, str | None]:
        """The answer rendered against its sources, and its language; remembered, since logs repeat answers."""
        key = (answer, tuple((s.n, s.section_id) for s in sources), None if cited is None else tuple(cited))
        found = self._panels.get(key)
        if found is None:
            found = (render_panel(answer, sources, self._url, cited=cited), detect_language(answer))
            if len(self._panels) >= _REMEMBERED:
                self._panels.clear()
            self._panels[key] = found
        return found

    def _sources(self, items: list[Any]) -> tuple[list[Source], list[str]]:
        sources, outside = [], []
        for n, item in enumerate(items, start=1):
            place = self._place(item)
            if place is None:
                continue
            section, out = place
            if out:
                outside.append(section)
            sources.append(Source(n=n, section_id=section, title=section, text=""))
        return sources, outside

    def _place(self, item: Any) -> tuple[str, bool] | None:
        """Where one source lands (its id, and whether outside the docs); remembered by its URL, path or id
        when the mapping reads no headings (then nothing else of the source matters)."""
        key = None
        if self.mapping.source_ids.heading is None:
            found = item if self.mapping.source_id == "@" else self._source_id.search(item)
            key = found if isinstance(found, str) else None
        if key is not None and key in self._places:
            return self._places[key]
        name = source_name(item, self.mapping.source_id, self.mapping.source_ids)
        if name is None:
            return None
        resolved = self.resolver.resolve(name)
        place = (resolved.id, resolved.level == "outside")
        if key is not None and len(self._places) < _REMEMBERED:
            self._places[key] = place
        return place

    def _cited(self, item: Any) -> str:
        """A listed citation as a label: a number as its digits, a source as its section id."""
        if isinstance(item, int) and not isinstance(item, bool):
            return str(item)
        if isinstance(item, str) and item.strip().isdigit():
            return item.strip()
        name = source_name(item, self.mapping.source_id, self.mapping.source_ids)
        return self.resolver.resolve(name).id if name is not None else str(item)[:200]

    def _url(self, section: str) -> str:
        page, _, anchor = section.partition("#")
        return f"{self.base_url}{page}" + (f"#{anchor}" if anchor else "")
