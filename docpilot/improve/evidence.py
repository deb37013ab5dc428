"""What suggestions read besides a row: the report, the run's settings and the docs.

``Evidence`` holds them and the run's retriever, over the run's saved index (built
again only where the docs changed since). A run that measured a target has no
retriever of DocPilot's: its rows hold the target's own ranking, answer and citations.
The functions here find a record's gold section and the words that separate it from
the question: the question's words the section lacks, and the section's words that
point at it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import Corpus, Section
from docpilot.improve.taxonomy import RunSettings, primed_sections
from docpilot.improve.vectors import FOLDER as VECTORS_FOLDER
from docpilot.improve.vectors import RememberingEmbedder
from docpilot.metrics.gold import matches
from docpilot.metrics.retrieval import RANK_DEPTH, first_relevant_rank
from docpilot.retrieval.rankers import Retriever
from docpilot.retrieval.tokens import STOPWORDS, terms, words
from docpilot.schema import Report, Row

COMMON_SHARE = 0.2
"""A word in at least this share of the docs' sections is common: it points at no section,
so a vocabulary entry never maps to it or from it."""

MIN_SECTIONS_FOR_COMMON = 20
"""Docs with fewer sections say too little about which of their words are common."""

USER_COMMON_SHARE = 0.05
"""A word in at least this share of the docs' sections is too general for a vocabulary entry on
either side, and for a heading to be asked to carry it: the docs already use it for many topics."""

# Words common in any English text that the retriever's stop list keeps: particles,
# pronouns, quantities and auxiliaries a question is full of ("turn it off", "come back").
# As a vocabulary target ("computed": ["gold", "some"]) they would pull every query towards
# no section; as a key ("off": ["syntax"]) they fire on questions about anything.
_FUNCTION_WORDS = frozenset("""
about above across after again against all almost along already also although always among another any
anybody anyone anything anyway anywhere around away back because before behind below beside besides
between beyond both came come comes coming down during each either else elsewhere enough even ever
every everybody everyone everything everywhere few first following for from further going gone got
gotten he her here hers herself him himself his however just keep keeps kept last later least less
let lets like likely little lot lots made make makes making many maybe me mine more most mostly much
my myself near need needed needs neither never next nobody none nor nothing now nowhere off often
once one ones only onto other others otherwise ought ours ourselves out over own per perhaps please
put quite rather really right same say says second see seem seems several she since so some
somebody someone something sometimes somewhere soon still sure take takes than thank thanks
them themselves thing things though through thus till together too toward towards try trying
under unless until up upon us use used uses using very via want wanted wants way ways well went
were whatever whenever wherever whether while whole within without yet yourself yourselves
able actually anymore basically certain cannot can could may might must shall should will would
get gets two lot far don doesn didn isn aren wasn weren won wouldn shouldn couldn haven hasn
give gives gave given giving
""".split())

# Words a question uses for the docs themselves ("what do the docs say about", the wording of
# `docpilot init`'s starter questions): they name where to look, never what the question is about.
_DOCS_WORDS = frozenset({"doc", "docs", "documentation", "documented"})

STOP_WORDS = STOPWORDS | _FUNCTION_WORDS | _DOCS_WORDS
"""Words never proposed as the user's side of a vocabulary entry, nor as words for a heading."""


@dataclass
class Evidence:
    """What suggestions read besides the row: the report, its run settings and the docs."""

    report: Report
    """The run being diagnosed; its rows show what other edits would do."""
    run: RunSettings
    """The run's settings the checks read (prime.top_k, the gate)."""
    corpus: Corpus | None = None
    """The docs, as they are now; None when they could not be read."""
    notes: list[str] = field(default_factory=list)
    """Caveats met while working (a retriever that could not be rebuilt, ...)."""
    vocabulary: list[Any] = field(default_factory=list)
    """The ``vocabulary.json`` entries chosen over the run's failing dev records
    (``docpilot.improve.vocabulary.VocabularyChoice``); a record's vocabulary edit is the ones that move it."""
    trials: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    """Config values tried on the dev records, by ``option=value`` (``docpilot.improve.refusals``)."""
    relater: Any = field(default=None, init=False, repr=False)
    """The words' relater (``docpilot.improve.vocabulary.Relater``), built once for every record."""
    embedder: RememberingEmbedder | None = field(default=None, init=False, repr=False)
    """The run's embedder, once ``retriever`` has opened the run's index (None for BM25)."""
    _retriever: Retriever | None = field(default=None, init=False, repr=False)
    _retriever_tried: bool = field(default=False, init=False, repr=False)
    _df: Counter[str] | None = field(default=None, init=False, repr=False)

    @property
    def config(self) -> dict[str, Any]:
        """The run's recorded configuration."""
        return self.report.config or {}

    def option(self, section: str, key: str, default: Any) -> Any:
        """A config option of the run, or ``default`` when the report does not record it."""
        return (self.config.get(section) or {}).get(key, default)

    @property
    def extractive(self) -> bool:
        """Whether the run's answers came from DocPilot's extractive model (never so for a target)."""
        return self.run.target is None and self.option("model", "provider", "extractive") == "extractive"

    def retriever(self) -> Retriever | None:
        """The run's retriever over the docs as they are now; None without docs, or for a run that
        measured a target: its ranking is the target's own, which DocPilot's retriever does not stand
        in for, so no index of DocPilot's is opened or built."""
        if self.corpus is None or self.run.target is not None or self._retriever_tried:
            return self._retriever
        self._retriever_tried = True
        try:
            settings = RetrievalConfig.model_validate(self.config.get("retrieval") or {})
        except ValidationError:
            settings = RetrievalConfig()
            self.notes.append("the report's retrieval settings are not readable; tried edits with the defaults")
        # The run's saved index, as the eval left it: nothing is built again unless the docs changed
        # (a report that names no cache gets an index in memory, and nothing is written).
        cache_dir = self.config.get("cache_dir")
        folder = Path(str(cache_dir)) if cache_dir else None
        retriever = Retriever.open(self.corpus, settings, cache_dir=folder) if folder else \
            Retriever(self.corpus, settings)
        if retriever.embedder is not None:
            # Wrapped once the index is open: the chunks' vectors are the index's; the questions
            # tried again and again are embedded once, and kept for the next improve of the run.
            self.embedder = RememberingEmbedder(retriever.embedder, folder / VECTORS_FOLDER if folder else None)
            retriever.embedder = self.embedder
        self._retriever = retriever
        return self._retriever

    def answers_language(self) -> str | None:
        """The language most of the run's answers were detected in: the docs' own, for a model that quotes them."""
        found = Counter(r.answer_language for r in self.report.rows if r.answer_language and not r.refused)
        return found.most_common(1)[0][0] if found else None

    def is_common(self, term: str) -> bool:
        """Whether a stemmed term is common: in English at large ("some"), or across these docs (``COMMON_SHARE``)."""
        if term in _COMMON_STEMS:
            return True
        sections = len(self.corpus.sections) if self.corpus is not None else 0
        return sections >= MIN_SECTIONS_FOR_COMMON and self.document_frequency(term) >= COMMON_SHARE * sections

    def document_frequency(self, term: str) -> int:
        """How many sections of the docs hold a stemmed term."""
        if self._df is None:
            self._df = Counter()
            if self.corpus is not None:
                for section in self.corpus.sections.values():
                    self._df.update(set(section_terms(self.corpus, section)))
        return self._df[term]


_COMMON_STEMS = frozenset(stem for word in _FUNCTION_WORDS for stem in terms(word))


def content_word(word: str, evidence: Evidence) -> bool:
    """Whether a question's word can name a topic: not a stop word or number, three letters or more, rare in the docs."""
    if word in STOP_WORDS or not word.isalpha() or len(word) < 3:
        return False
    stems = terms(word)
    if not stems:
        return False
    sections = len(evidence.corpus.sections) if evidence.corpus is not None else 0
    return not (sections >= MIN_SECTIONS_FOR_COMMON
                and evidence.document_frequency(stems[0]) >= USER_COMMON_SHARE * sections)


def section_terms(corpus: Corpus, section: Section) -> list[str]:
    """The stemmed words a section is found by: heading path, page description and keywords, text."""
    page = corpus.pages[section.page_id]
    parts = [" ".join(section.heading_path), page.description or "", " ".join(page.keywords), section.text]
    return terms("\n".join(parts))


def gold_sections(corpus: Corpus, gold: list[str]) -> list[Section]:
    """Every section of the docs that a gold entry matches, in document order."""
    return [s for s in corpus.sections.values() if any(matches(s.id, entry) for entry in gold)]


def focus_section(row: Row, evidence: Evidence) -> Section | None:
    """The gold section the record turns on.

    The first gold section the model read, else the first one ranked in the top 8,
    else the one sharing most words with the gold answer and the question.
    """
    corpus = evidence.corpus
    if corpus is None:
        return None
    for section_id in [*primed_sections(row, evidence.run), *row.retrieved[:RANK_DEPTH]]:
        if section_id in corpus.sections and first_relevant_rank([section_id], row.gold):
            return corpus.sections[section_id]
    candidates = gold_sections(corpus, row.gold)
    if not candidates:
        return None
    wanted = set(terms(f"{row.gold_answer or ''} {row.question}"))
    return max(candidates, key=lambda s: len(wanted & set(section_terms(corpus, s))))


def missing_words(row: Row, corpus: Corpus, section: Section, evidence: Evidence) -> list[str]:
    """The question's words the section lacks, rarest in the docs first.

    Words the docs never use come first: they are the user's vocabulary, and mapping
    them disturbs no other query about the docs' own words. Words common across the
    docs are left out.
    """
    have = set(section_terms(corpus, section))
    seen: dict[str, str] = {}
    for word in words(row.question):
        stems = terms(word)
        if not stems or stems[0] in have or stems[0] in seen.values() or not content_word(word, evidence):
            continue
        seen[word] = stems[0]
    return sorted(seen, key=lambda w: evidence.document_frequency(seen[w]))
