"""The searches of a serving process, run on threads of their own so the answer loop keeps streaming.

A question's search is blocking work: BM25 and the dense products are CPU-bound numpy,
and the ``openai`` embedder waits on an HTTP service, retrying with ``time.sleep``. Run
on the answer loop, one search stops every stream that loop is sending until it is
done; a stalled embedding service stops them for its whole timeout. Here each search
runs on a thread of a small pool, and the answer loop awaits it like any other I/O.

How many threads: none, when the search is a fraction of a millisecond of Python
(BM25 alone, or with the ``static`` embedder). Handing such a search to a thread and
back costs more CPU than the search itself (the thread's wake-ups and the GIL changing
hands), and no other stream runs meanwhile anyway, since the search holds the GIL for
less than Python's switch interval; so it runs on the answer loop. One thread, when
embedding is work for the cores (MiniLM's matrix products let go of the GIL, and the
streams flow meanwhile).
The serving processes already split the cores among themselves, and numpy's BLAS too
(``docpilot.server.serving.share_blas_threads``): a second search thread in the same
process would run a second set of BLAS threads on the same share and slow both. When
the question's embedding waits on a service (the ``openai`` embedder), the waiting
needs no core, so every question this process may hold at once gets a thread for it.

The ranking itself runs under a lock: the retriever keeps small caches (scope masks)
that are not written for threads, and it is the embedding, not the ranking, that
waits. The lock is let go while the question's embedding is computed, so two
questions wait on the service at once but rank one after another.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from docpilot.api.schema import AskRequest
from docpilot.assistant.workspace import Workspace
from docpilot.retrieval.embedders import OpenAIEmbedder, StaticEmbedder
from docpilot.retrieval.rankers import Hit


@dataclass(frozen=True)
class Search:
    """One question's ranked hits and where the search's time went."""

    hits: list[Hit]
    """The ranked sections, best first."""
    embed_ms: float
    """Turning the question into what the index is searched with: its terms and its embedding."""
    retrieve_ms: float
    """The rest of the search: scoring and ranking."""


def waits_on_service(embedder: object | None) -> bool:
    """Whether embedding a question waits on an HTTP service rather than on the cores."""
    return isinstance(embedder, OpenAIEmbedder)


def search_threads(embedder: object | None, questions_at_once: int) -> int:
    """The threads a serving process searches on: none (a cheap search runs on the answer loop), one, or one
    per question it holds when embedding waits on a service."""
    if embedder is None or isinstance(embedder, StaticEmbedder):
        return 0
    return max(1, questions_at_once) if waits_on_service(embedder) else 1


class SearchPool:
    """Runs each question's search on a worker thread; start it in the process that serves."""

    def __init__(self, workspace: Workspace) -> None:
        self._ws = workspace
        # The embedder as the workspace was opened with it: ``search`` swaps the retriever's
        # for a moment, and a thread reading it then would find another question's.
        self._embedder = getattr(workspace.retriever, "embedder", None)
        self._ranking = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self.threads = 0

    def start(self, questions_at_once: int) -> None:
        """Start the threads, if the search needs any (once per process: a forked worker starts its own)."""
        self.threads = search_threads(self._embedder, questions_at_once)
        if self.threads:
            self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="docpilot-search")

    def stop(self) -> None:
        """Let the threads go; a search still waiting on a service is abandoned, not awaited."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def search(self, ask: AskRequest, query: str | None = None) -> Search:
        """The question's search, run on a pool thread (or here, when the search needs none).

        ``query`` is what the docs are searched with when it is not the question as asked
        (a follow-up, read with the turns before it).
        """
        text = ask.question if query is None else query
        if self._executor is None:
            return self._search(text, ask.scope)
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._search, text, ask.scope)

    def _search(self, query: str, scope: list[str] | None) -> Search:
        """The ranked hits, timed: ``embed`` is the query terms and the embedding, ``retrieve`` the rest.

        BM25 needs no model, so its ``embed`` is a fraction of a millisecond; ``embed +
        retrieve`` is the whole search, the local runtime's `retrieve` stage. Waiting for
        another question's ranking counts in neither.
        """
        clock = time.perf_counter
        retriever = self._ws.retriever
        terms_ms = 0.0
        if retriever.settings.retriever != "dense":
            mark = clock()
            retriever.query_terms(query)  # the search repeats this step; timed apart here
            terms_ms = (clock() - mark) * 1000
        timed = _Unlocking(self._embedder, self._ranking) if self._embedder is not None else None
        with self._ranking:
            mark = clock()
            if timed is not None:
                retriever.embedder = timed  # read by the search only while it holds the lock
            try:
                hits = retriever.search(query, scope=scope, k=self._ws.config.retrieval.top_k)
            finally:
                if timed is not None:
                    retriever.embedder = self._embedder
            search_ms = (clock() - mark) * 1000
        spent_ms, waited_ms = (timed.spent_ms, timed.waited_ms) if timed is not None else (0.0, 0.0)
        return Search(
            hits=hits,
            embed_ms=terms_ms + spent_ms,
            retrieve_ms=max(search_ms - spent_ms - waited_ms - terms_ms, 0.0),
        )


class _Unlocking:
    """An embedder that lets go of the ranking lock while it embeds, and times the embedding and the wait after."""

    def __init__(self, inner: Any, lock: threading.Lock) -> None:
        self._inner = inner
        self._lock = lock
        self._owner = threading.get_ident()  # the pool thread whose search holds the lock
        self.spent_ms = 0.0
        self.waited_ms = 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def embed(self, texts: Sequence[str]) -> object:
        if threading.get_ident() != self._owner:
            # Another caller of the same retriever (the local runtime, in a process that
            # serves too) met this wrapper: the lock is not its to let go.
            return self._inner.embed(texts)
        clock = time.perf_counter
        self._lock.release()
        mark = clock()
        try:
            return self._inner.embed(texts)
        finally:
            embedded = clock()
            self._lock.acquire()
            self.spent_ms += (embedded - mark) * 1000
            self.waited_ms += (clock() - embedded) * 1000
