"""What one eval run carries from stage to stage: each record's trace, and the process's workspace.

A ``Trace`` is one record on its way through the stages; a ``Workspace`` is what the
stages share within a process (config, corpus, index, cache), opened once and kept
while the docs folder stays the same.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from docpilot.assistant.render import Panel
from docpilot.cache import StageCache
from docpilot.config.model import Config
from docpilot.corpus.pages import Chunk, Corpus, docs_signature, load_corpus
from docpilot.errors import CorpusError
from docpilot.models.base import Prompt, Turn
from docpilot.models.extractive import document_frequencies
from docpilot.schema import AttackProbe, GoldenRecord

if TYPE_CHECKING:
    from docpilot.retrieval.bias import BiasMeter
    from docpilot.retrieval.rankers import Retriever


@dataclass(slots=True)
class Trace:
    """One record on its way through the stages.

    A plain dataclass, not a pydantic model: it is internal, only the stages build and
    change it, and each record's trace is written to a couple of dozen times per run.
    """

    record: GoldenRecord
    """The golden record (for an attack probe: its prompt as the question, no gold)."""
    attack: AttackProbe | None = None
    """The attack probe this trace runs, if it is one."""
    hits: list[dict] = field(default_factory=list)
    """Ranked hits: section_id, chunk_id, score."""
    deeper: list[str] = field(default_factory=list)
    """Section ids ranked after ``hits``, down to ``depth``: where a gold section the top ones miss sits."""
    depth: int | None = None
    """How deep the ranking was searched (``hits`` and ``deeper``); None when only ``hits`` came (from a server)."""
    unranked: bool = False
    """The assistant showed no ranking (a target whose reply maps no sources): no retrieval metric reads it."""
    outside_docs: list[str] = field(default_factory=list)
    """Ranked sources that name nothing the docs hold (a target's), as mapped."""
    links: dict[str, str] = field(default_factory=dict)
    """Where a source the docs do not hold links to: the URL or path the assistant gave for it."""
    stages_dropped: int = 0
    """`Server-Timing` entries a target sent that were no measurement, dropped."""
    retrieve_ms: float | None = None
    """Time the retrieval took when it was computed."""
    prompt: Prompt | None = None
    """What the model was given."""
    gate_refused: bool = False
    """The retrieval gate refused before the model."""
    turn: Turn | None = None
    """What the model produced."""
    turn_key: str | None = None
    """The model-stage cache key of ``prompt``, once worked out (``run.road.turn_key``)."""
    sample: int | None = None
    """Which sample of the record's turn this trace asks, in a run of several (``model.repeat``); None for one."""
    stages_ms: dict[str, float] | None = None
    """Stage timings a server reported (server runtime); None when the stages ran here."""
    languages: dict[str, str | None] = field(default_factory=dict)
    """Detected languages of the question and the answer, kept with the cached turn."""
    earlier: list[tuple[str, str | None]] = field(default_factory=list)
    """For a follow-up: the conversation's turns before it as asked, (question, the answer carried forward:
    the golden set's ``answer_given``, else the assistant's own answer of this run, None when it had none)."""
    query: str | None = None
    """What the docs were searched with, when that was not the question alone (a follow-up, read with the
    turns before it); None: the question."""
    thread: str | None = None
    """The conversation thread an assistant that keeps its own threads named (a target's ``reply.thread``)."""
    panel: Panel | None = None
    """The rendered answer."""
    cached: list[str] = field(default_factory=list)
    """Stages whose results came from the cache."""
    timeline: dict[str, tuple[float, float]] = field(default_factory=dict)
    """When each stage ran for this record: stage → (start, end), seconds since the epoch (the row's ``timeline``)."""


@dataclass
class Workspace:
    """What the stages share within one process: the config, corpus, index and cache.

    The retriever (and with it the index, seconds to build) opens the first time it is
    asked for: a run that ranks nothing here (the server runtime, a target) never opens it.
    """

    config: Config
    corpus: Corpus
    chunks: dict[str, Chunk]
    cache: StageCache | None
    signature: tuple = ()
    """The docs folder's files when the corpus was read (``docs_signature``)."""
    _retriever: Retriever | None = field(default=None, repr=False)
    _opening: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _identity: dict | None = field(default=None, repr=False)
    _idf: dict[str, float] | None = field(default=None, repr=False)
    _bias: BiasMeter | None = field(default=None, repr=False)

    @property
    def retriever(self) -> Retriever:
        """The retriever over the corpus and its index, opened (loaded, or built) on first use, once."""
        if self._retriever is None:
            with self._opening:
                if self._retriever is None:
                    self._retriever = _retriever(self.corpus, self.config, True)
        return self._retriever

    @property
    def idf(self) -> dict[str, float]:
        """Word weights over the corpus's chunks, counted once per process."""
        if self._idf is None:
            self._idf = document_frequencies([c.text for c in self.corpus.chunks])
        return self._idf

    @property
    def bias(self) -> BiasMeter:
        """How much a question borrows from its gold sections (``Row.overlap``), over the retriever's own BM25
        when it is open and has one; made once per process."""
        if self._bias is None:
            from docpilot.retrieval.bias import BiasMeter

            index = self._retriever.index.lexical if self._retriever is not None else None
            self._bias = BiasMeter(self.corpus, self.config.retrieval, index=index)
        return self._bias


# Workspaces opened in this process, by config and cache use: a schedule, a Dask worker,
# the server and Python callers open the same docs run after run, and an index takes
# seconds to load. Locked, since evals on several threads open theirs at once; two at
# most, since each holds a corpus and its index in memory. A run keeps the workspace it
# opened for itself (``docpilot.run.context``), so dropping one here never affects a run.
_OPEN: OrderedDict[tuple, Workspace] = OrderedDict()
_OPEN_MOST = 2
_OPEN_LOCK = threading.Lock()


def open_workspace(config: Config, *, use_cache: bool = True, fingerprint: str | None = None,
                   ranks: bool = True) -> Workspace:
    """The corpus, index and cache for a config, loaded once per process while the docs stay the same.

    ``ranks`` opens the retriever now (a missing index is built here, where its progress
    is shown, and before the stage cache is first written); False leaves it to open when
    first asked for, or never.

    A process that lives across runs (a schedule, a Dask worker, the Python API) must not
    rank with the docs of an earlier run, so the kept workspace is checked against the
    folder. ``fingerprint`` is the corpus fingerprint the run was started with: the kept
    workspace is used only when it matches, and a folder that no longer gives it is an
    error, since stage results would otherwise be stored under keys of other docs.
    Without one (the start of a run) the folder's files are compared by size and times.
    """
    workspace = _workspace(config, use_cache=use_cache, fingerprint=fingerprint, ranks=ranks)
    if ranks:
        workspace.retriever  # noqa: B018  (the property opens it)
    return workspace


def _retriever(corpus: Corpus, config: Config, ranks: bool) -> Retriever | None:
    """The retriever over ``corpus`` (its index loaded, or built), or None when the caller ranks nothing here."""
    if not ranks:
        return None
    from docpilot.retrieval.rankers import Retriever  # numpy and the embedders: not for a run that ranks elsewhere

    return Retriever.open(corpus, config.retrieval, cache_dir=config.cache_dir)


def _workspace(config: Config, *, use_cache: bool, fingerprint: str | None, ranks: bool) -> Workspace:
    key = (config.model_dump_json(), use_cache)
    with _OPEN_LOCK:
        workspace = _OPEN.get(key)
    if workspace is not None:
        if fingerprint is not None:
            if workspace.corpus.fingerprint == fingerprint:
                return workspace
        elif workspace.signature == docs_signature(config.corpus.docs):
            return workspace
    signature = docs_signature(config.corpus.docs)
    kin = _kin(config, fingerprint, signature)
    if kin is not None:
        workspace = _beside(kin, config, use_cache, ranks)
        with _OPEN_LOCK:
            _OPEN[key] = workspace
            _OPEN.move_to_end(key)
            while len(_OPEN) > _OPEN_MOST:
                _OPEN.popitem(last=False)
        return workspace
    corpus = load_corpus(Path(config.corpus.docs), chunk_words=config.corpus.chunk_words)
    if fingerprint is not None and corpus.fingerprint != fingerprint:
        raise CorpusError(
            f"the docs changed during the run (corpus {corpus.fingerprint[:12]}, "
            f"the run started with {fingerprint[:12]})",
            path=Path(config.corpus.docs),
            hint="run the eval again once the docs folder is no longer being edited",
        )
    retriever = _retriever(corpus, config, ranks)  # an index that cannot be saved says so before the cache is made
    workspace = Workspace(
        config=config,
        corpus=corpus,
        _retriever=retriever,
        chunks={c.id: c for c in corpus.chunks},
        cache=StageCache(config.cache_dir) if use_cache else None,
        signature=signature,
    )
    with _OPEN_LOCK:
        _OPEN[key] = workspace
        _OPEN.move_to_end(key)
        while len(_OPEN) > _OPEN_MOST:  # do not pile up indexes
            _OPEN.popitem(last=False)
    return workspace


def _kin(config: Config, fingerprint: str | None, signature: tuple) -> Workspace | None:
    """A kept workspace of the same docs, cut the same way: one whose corpus another config can share.

    The variants of a run differ in the model, the prompt or the ranking, never in the docs;
    each loading the corpus (and, when they rank alike, the index) again would cost seconds.
    """
    with _OPEN_LOCK:
        kept = list(_OPEN.values())
    for workspace in reversed(kept):
        same_docs = workspace.config.corpus == config.corpus and workspace.config.cache_dir == config.cache_dir
        # The docs as they are on disk now, and (for a run under way) the corpus it began with.
        current = workspace.signature == signature and fingerprint in (None, workspace.corpus.fingerprint)
        if same_docs and current:
            return workspace
    return None


def _beside(kin: Workspace, config: Config, use_cache: bool, ranks: bool) -> Workspace:
    """A workspace for ``config`` on ``kin``'s corpus; its index too when both rank alike."""
    same_ranking = kin.config.retrieval == config.retrieval
    retriever = kin._retriever if same_ranking and kin._retriever is not None else _retriever(kin.corpus, config, ranks)
    return Workspace(
        config=config,
        corpus=kin.corpus,
        _retriever=retriever,
        chunks=kin.chunks,
        cache=(kin.cache or StageCache(config.cache_dir)) if use_cache else None,  # one store, shared by threads
        signature=kin.signature,
        _idf=kin._idf,
    )
