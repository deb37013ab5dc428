"""Vocabulary entries chosen across all of a run's failing records, kept only where a docs writer would make them.

A ``vocabulary.json`` entry maps a word people ask with to words the docs use. An
entry between unrelated words (``"off": ["syntax"]``) can lift the one record it was
made for and no other question, so an entry is proposed only when all of this holds:

- the user's word is a content word: not a stop word, not a number, at least three
  letters, and in fewer than ``COMMON_SHARE`` of the docs' sections;
- each doc word it maps to is distinctive of the gold section (tf·idf, never a word
  most sections use) and *related* to the user's word (``relate``): a spelling variant
  or the same stem, close in meaning (the cosine of the two words' MiniLM vectors), or
  used in the same sections across the docs (normalised PMI);
- tried with the run's retriever on every dev positive whose question holds the word,
  the entry raises dev recall@8 (or lifts a gold section into the sources the model
  reads), lowers dev MRR nowhere on the whole, and lowers neither recall@8 nor the
  reciprocal rank of any record that passed.

The entries are chosen greedily over the failing dev records at once: the candidate
with the largest gain first, each next one tried together with those already chosen,
so two entries that only work apart are never both kept.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from docpilot.corpus.pages import Section
from docpilot.improve.evidence import Evidence, content_word, focus_section, section_terms
from docpilot.improve.vectors import RememberingEmbedder
from docpilot.metrics.gold import matches
from docpilot.metrics.retrieval import RANK_DEPTH
from docpilot.retrieval.rankers import Retriever
from docpilot.retrieval.tokens import terms, words
from docpilot.schema import Row

RETRIEVAL_CAUSES = ("not-retrieved", "gold-below-primed")
"""The causes a vocabulary entry can move."""

MEANING_THRESHOLD = {"minilm": 0.55, "static": 0.45}
"""Cosine of two words' vectors at or above which they are related in meaning, per embedder.

Set on the dev splits' candidate pairs (docs/architecture.md#measurements): in a band
below the bar, pairs that lifted one record by chance score as high as pairs a docs
writer would map, since single words carry too little context to tell them apart. So
the bar sits above that band, and a pair below it needs another relation (spelling,
co-occurrence). The static vectors, distilled from the same model, spread less."""

COOCCURRENCE_THRESHOLD = 0.5
"""Normalised PMI over sections at or above which two words the docs both use go together."""

MIN_SHARED_SECTIONS = 5
"""Sections that must hold both words before their co-occurrence says anything."""

MAX_TARGETS = 2
"""Doc words per entry: the most related first."""

CANDIDATE_TARGETS = 12
"""The gold section's most distinctive words, looked at as targets for each user word."""

Relation = Literal["spelling", "meaning", "co-occurrence"]


class VocabularyChoice(BaseModel):
    """One entry chosen for ``vocabulary.json``, with why it was chosen and what it does on dev."""

    model_config = ConfigDict(extra="forbid")

    word: str
    """The user's word, the entry's key."""
    targets: list[str]
    """The doc words it maps to (after the ones the file already lists for it)."""
    relations: dict[str, str]
    """Doc word → how it is related to the user's word, with the figure (``meaning 0.45``)."""
    fixes: dict[str, str]
    """Record id → its first gold rank before → after (``-`` past the top 8), for the records it moves up."""
    fires_on: int
    """Dev positives whose question holds the word."""
    causes: list[str]
    """The causes of the failing records it moves."""
    recall_gain: float
    """Dev recall@8 after the entry minus before (with the entries chosen before it)."""
    mrr_gain: float
    """Dev MRR after minus before."""
    reason: str
    """The choice in one sentence, for the reader."""


@dataclass
class _Standing:
    """A record's retrieval figures under one vocabulary: recall@8, reciprocal rank, first gold rank."""

    recall: float
    rr: float
    rank: int | None


@dataclass
class WordVectors:
    """Vectors of single words from MiniLM (the ``minilm`` extra) or, without it, the static embedder.

    ``shared`` is the run's own embedder (``Evidence.embedder``): when it is the one
    these vectors would come from, it is used instead of loading the model again, and
    the words' vectors are kept with the questions'.
    """

    shared: RememberingEmbedder | None = None
    _embedder: object | None = None
    kind: str = ""
    _cache: dict[str, np.ndarray] = field(default_factory=dict)

    def _load(self):
        if self._embedder is None:
            from docpilot.errors import ConfigError
            from docpilot.retrieval.embedders import MiniLMEmbedder, StaticEmbedder

            try:
                found, self.kind = MiniLMEmbedder(), "minilm"
            except ConfigError:
                found, self.kind = StaticEmbedder(), "static"
            shared = self.shared
            self._embedder = shared if shared is not None and shared.name == found.name else \
                RememberingEmbedder(found, shared.folder if shared is not None else None)
        return self._embedder

    def similarity(self, a: str, b: str) -> float:
        """Cosine of the two words' vectors."""
        self.prepare([a, b])
        return float(self._cache[a] @ self._cache[b])

    def prepare(self, wanted: Iterable[str]) -> None:
        """Embed the words not seen yet, in one batch."""
        missing = sorted({w for w in wanted if w not in self._cache})
        if missing:
            for word, vector in zip(missing, self._load().embed(missing), strict=True):
                self._cache[word] = vector

    def save(self) -> None:
        """Keep the words' vectors for the next run."""
        if isinstance(self._embedder, RememberingEmbedder):
            self._embedder.save()

    @property
    def threshold(self) -> float:
        self._load()
        return MEANING_THRESHOLD[self.kind]


def spelling_variants(a: str, b: str) -> bool:
    """Whether two words are one word spelt two ways: the same stem, one the other plus a suffix, or one letter apart.

    ``colour``/``color``, ``cancelled``/``canceled``, ``config``/``configuration``.
    """
    if a == b:
        return True
    stems_a, stems_b = terms(a), terms(b)
    if stems_a and stems_a[:1] == stems_b[:1]:
        return True
    short, long = sorted((a, b), key=len)
    if len(short) >= 4 and long.startswith(short) and long[len(short):] in _SUFFIXES:
        return True
    return min(len(a), len(b)) >= 5 and _one_edit_apart(a, b)


_SUFFIXES = frozenset("""
s es ed d ing er ers or ors ion ions ation ations ication ure ity ize ise ized ised ment ments able ible al ally
ly ness uration urations x
""".split())
"""What may follow a word for a longer word to be the same word in another form ("config" + "uration")."""


def _one_edit_apart(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long = sorted((a, b), key=len)
    for i in range(len(long)):
        if long[:i] + long[i + 1:] == short:
            return True
    return False


class _Cooccurrence:
    """Which sections hold each stemmed term, for normalised PMI between two words the docs use."""

    def __init__(self, evidence: Evidence) -> None:
        self._sections: dict[str, set[int]] = {}
        self._total = 0
        if evidence.corpus is not None:
            for number, section in enumerate(evidence.corpus.sections.values()):
                for term in set(section_terms(evidence.corpus, section)):
                    self._sections.setdefault(term, set()).add(number)
            self._total = len(evidence.corpus.sections)

    def npmi(self, a: str, b: str) -> float | None:
        """log(p(a,b) / p(a)p(b)) / −log p(a,b) over sections; None when fewer than MIN_SHARED_SECTIONS hold both."""
        sa, sb = self._sections.get(a, set()), self._sections.get(b, set())
        both = len(sa & sb)
        if both < MIN_SHARED_SECTIONS or not self._total:
            return None
        p_ab, p_a, p_b = both / self._total, len(sa) / self._total, len(sb) / self._total
        if p_ab >= 1.0:
            return 1.0
        return math.log(p_ab / (p_a * p_b)) / -math.log(p_ab)


@dataclass
class Relater:
    """Decides whether a doc word is related to a user word, and says how."""

    evidence: Evidence
    vectors: WordVectors | None = None
    _cooccurrence: _Cooccurrence | None = None

    def __post_init__(self) -> None:
        if self.vectors is None:
            self.vectors = WordVectors(shared=self.evidence.embedder)

    def relate(self, user_word: str, doc_word: str) -> str | None:
        """How ``doc_word`` is related to ``user_word`` (``spelling``, ``meaning 0.45``, ``co-occurrence 0.41``), or None."""
        if spelling_variants(user_word, doc_word):
            return "spelling"
        if self._cooccurrence is None:
            self._cooccurrence = _Cooccurrence(self.evidence)
        npmi = self._cooccurrence.npmi(terms(user_word)[0], terms(doc_word)[0])
        if npmi is not None and npmi >= COOCCURRENCE_THRESHOLD:
            return f"co-occurrence {npmi:.2f}"
        cosine = self.vectors.similarity(user_word, doc_word)
        if cosine >= self.vectors.threshold:
            return f"meaning {cosine:.2f}"
        return None


def _distinctive_words(row: Row, section: Section, evidence: Evidence) -> list[str]:
    """The gold section's words that point at it, most distinctive first (tf·idf); none the question uses."""
    asked = set(terms(row.question))
    corpus = evidence.corpus
    sections = max(len(corpus.sections), 1)
    counts = Counter(section_terms(corpus, section))
    surface: dict[str, str] = {}
    for word in [*words(section.title), *words(section.text)]:
        stems = terms(word)
        if stems and content_word(word, evidence):
            surface.setdefault(stems[0], word)

    def weight(stem: str) -> float:
        return counts[stem] * math.log(1 + sections / max(evidence.document_frequency(stem), 1))

    ranked = sorted((s for s in surface if s not in asked and not evidence.is_common(s)), key=weight, reverse=True)
    return [surface[s] for s in ranked[:CANDIDATE_TARGETS]]


def related_words(candidates: list[str], row: Row, section: Section, evidence: Evidence) -> list[str]:
    """Those of the question's ``candidates`` related (``Relater.relate``) to a word of the section's heading
    or to one of its most distinctive words: the words a writer could add to that section."""
    if not candidates or evidence.corpus is None:
        return []
    relater = shared_relater(evidence)
    own = [w for w in words(section.title) if content_word(w, evidence)]
    doc_words = list(dict.fromkeys([*own, *_distinctive_words(row, section, evidence)]))
    relater.vectors.prepare([*candidates, *doc_words])
    found = [w for w in candidates if any(relater.relate(w, d) for d in doc_words)]
    relater.vectors.save()
    return found


def shared_relater(evidence: Evidence) -> Relater:
    """The one ``Relater`` of a diagnosis, kept on ``evidence``: its co-occurrence table is built once."""
    if evidence.relater is None:
        evidence.relater = Relater(evidence)
    return evidence.relater


def _user_words(row: Row, section: Section, evidence: Evidence) -> list[str]:
    """The question's content words the gold section lacks."""
    have = set(section_terms(evidence.corpus, section))
    found = []
    for word in dict.fromkeys(words(row.question)):
        stems = terms(word)
        if content_word(word, evidence) and stems and stems[0] not in have:
            found.append(word)
    return found


def _standing(row: Row, retriever: Retriever) -> _Standing:
    hits = retriever.search(row.question, scope=row.scope, k=RANK_DEPTH)
    ranked = [h.section_id for h in hits]
    rank = next((i for i, s in enumerate(ranked, 1) if any(matches(s, g) for g in row.gold)), None)
    recall = sum(any(matches(s, g) for s in ranked) for g in row.gold) / len(row.gold)
    return _Standing(recall=recall, rr=1.0 / rank if rank else 0.0, rank=rank)


def _read(standing: _Standing, prime_k: int) -> int:
    """1 when the record's first gold section is among the sources the model reads."""
    return int(standing.rank is not None and standing.rank <= prime_k)


def _rank_text(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def choose_vocabulary(evidence: Evidence, failing: dict[str, str]) -> list[VocabularyChoice]:
    """The entries to add to ``vocabulary.json``, chosen over every failing dev record at once.

    ``failing`` maps the id of each failing record to its cause; only records with a
    retrieval cause (``RETRIEVAL_CAUSES``) on the dev split get candidates, and every dev
    positive is a record the entries must not hurt. Test records are never read.
    """
    corpus, base = evidence.corpus, evidence.retriever()
    if corpus is None or base is None:
        return []
    dev = [r for r in evidence.report.rows if r.kind == "positive" and r.gold and r.split == "dev"]
    targets_of = [r for r in dev if failing.get(r.id) in RETRIEVAL_CAUSES]
    prime_k = evidence.run.prime_k
    relater = shared_relater(evidence)
    candidates = _candidates(targets_of, evidence, relater)
    if not candidates:
        return []
    asks = {r.id: set(words(r.question)) for r in dev}
    passed = {r.id for r in dev if r.id not in failing}
    vocabulary = {k: list(v) for k, v in corpus.vocabulary.items()}
    standing = {r.id: _standing(r, base) for r in dev}
    chosen: list[VocabularyChoice] = []
    remaining = {key: _best_targets(key, related, relater) for key, related in candidates.items()}
    while remaining:
        best: tuple[float, float, str, dict[str, _Standing]] | None = None
        for key, targets in remaining.items():
            trial = dict(vocabulary)
            trial[key] = [*vocabulary.get(key, []), *[t for t in targets if t not in vocabulary.get(key, [])]]
            retriever = base.with_vocabulary(trial)
            moved = {r.id: _standing(r, retriever) for r in dev if key in asks[r.id]}
            if any(moved[i].recall < standing[i].recall - 1e-12 or moved[i].rr < standing[i].rr - 1e-12
                   for i in moved if i in passed):
                continue
            recall_gain = sum(moved[i].recall - standing[i].recall for i in moved) / len(dev)
            mrr_gain = sum(moved[i].rr - standing[i].rr for i in moved) / len(dev)
            read = sum(_read(moved[i], prime_k) - _read(standing[i], prime_k) for i in moved)
            if recall_gain < -1e-12 or mrr_gain < -1e-12 or (recall_gain <= 1e-12 and read <= 0):
                continue
            if best is None or (recall_gain, mrr_gain) > (best[0], best[1]):
                best = (recall_gain, mrr_gain, key, moved)
        if best is None:
            break
        recall_gain, mrr_gain, key, moved = best
        targets = remaining.pop(key)
        added = [t for t in targets if t not in vocabulary.get(key, [])]
        vocabulary[key] = [*vocabulary.get(key, []), *added]
        fixes = {i: f"{_rank_text(standing[i].rank)}→{_rank_text(s.rank)}" for i, s in moved.items()
                 if (s.recall, s.rr) > (standing[i].recall, standing[i].rr)}
        relations = {t: candidates[key][t] for t in added}
        chosen.append(VocabularyChoice(
            word=key, targets=added, relations=relations, fixes=fixes, fires_on=len(moved),
            causes=sorted({failing[i] for i in fixes if i in failing}),
            recall_gain=round(recall_gain, 6), mrr_gain=round(mrr_gain, 6),
            reason=_reason(key, added, relations, fixes, len(moved), recall_gain, mrr_gain),
        ))
        standing.update(moved)
    return chosen


def _candidates(rows: list[Row], evidence: Evidence, relater: Relater) -> dict[str, dict[str, str]]:
    """User word → the related doc words of the gold sections of ``rows`` → how each is related."""
    candidates: dict[str, dict[str, str]] = {}
    for row in rows:
        section = focus_section(row, evidence)
        if section is None:
            continue
        keys, docs = _user_words(row, section, evidence), _distinctive_words(row, section, evidence)
        relater.vectors.prepare([*keys, *docs])
        for key in keys:
            for doc_word in docs:
                how = relater.relate(key, doc_word)
                if how is not None:
                    candidates.setdefault(key, {}).setdefault(doc_word, how)
    relater.vectors.save()  # every word it relates is embedded by now
    return candidates


def _best_targets(key: str, related: dict[str, str], relater: Relater) -> list[str]:
    """The related doc words for ``key``, spelling variants first, then by similarity; at most MAX_TARGETS."""
    def strength(word: str) -> float:
        how = related[word]
        return 2.0 if how == "spelling" else float(how.rsplit(" ", 1)[-1])

    return sorted(related, key=strength, reverse=True)[:MAX_TARGETS]


def _reason(key: str, targets: list[str], relations: dict[str, str], fixes: dict[str, str], fires: int,
            recall_gain: float, mrr_gain: float) -> str:
    related = " and ".join(f'"{t}" ({relations[t]})' for t in targets)
    moved = ", ".join(f"{i} {r}" for i, r in fixes.items())
    verb = "is" if len(targets) == 1 else "are"
    return (f'"{key}" is a content word of the questions, {related} {verb} related to it; on dev it fires on '
            f"{fires} record(s), moves {moved} (first gold rank), recall@8 {recall_gain:+.3f}, "
            f"MRR {mrr_gain:+.3f}, and lowers no record that passed")
