"""The rankings variants share: each retrieval setting that two or more variants use is ranked once.

A run of several variants (``run.variants``) ranks the records of such a setting on a
thread of its own, a slice at a time, storing each ranking in the stage cache; each
variant's stages wait only for the shard they are about to look up (``SharedRanking.
wait``, or, in a variant's own process, ``run.forks.RankingFeed``), so the first turns
go out while the rest is still being ranked.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection

from docpilot.progress import Progress
from docpilot.run.job import EvalJob, job_records


class SharedRanking:
    """The rankings of one retrieval setting that several variants share, ranked once on a thread of its own.

    Records are ranked in file order, a slice at a time, and stored in the stage cache;
    a variant's stages wait (``wait``) only for the records of the shard they are about
    to look up, so the first turns go out while the rest is still being ranked.
    """

    SLICE = 32

    def __init__(self, job: EvalJob) -> None:
        self.job = job
        self.variant = job.variant or ""
        self.computed: set[str] = set()
        """Ids of the records ranked here (the others were stored already)."""
        self._ready: set[str] = set()
        self._error: BaseException | None = None
        self._finished = False
        self._condition = threading.Condition()
        self._thread = threading.Thread(target=self._rank, name="docpilot-shared-ranking", daemon=True)
        self.listeners: list[Callable[[tuple], None]] = []
        """Told ``("ranked", ids)`` after each slice and ``("finished", error or None)`` at the end
        (the variants in processes of their own: ``run.forks``)."""

    def start(self, progress: Progress) -> SharedRanking:
        self._progress = progress
        self._thread.start()
        return self

    def _rank(self) -> None:
        from docpilot import progress as progress_module
        from docpilot.assistant.workspace import open_workspace
        from docpilot.run.pipeline import lookup_rankings, rank_shard, start_traces

        try:
            with progress_module.counting(self._progress):
                job = self.job
                workspace = open_workspace(job.config, use_cache=True, fingerprint=job.corpus_fingerprint)
                traces = start_traces(job_records(job))
                progress_module.start("retrieve", len(traces))
                for offset in range(0, len(traces), self.SLICE):
                    part = traces[offset: offset + self.SLICE]
                    todo = lookup_rankings(workspace, part, refresh="retrieve" in job.refresh)
                    progress_module.advance("retrieve", len(part) - len(todo))
                    rank_shard(workspace, [part[p] for p in todo])
                    with self._condition:
                        self.computed.update(part[p].record.id for p in todo)
                        self._ready.update(t.record.id for t in part)
                        self._condition.notify_all()
                    self._tell(("ranked", [t.record.id for t in part]))
        except BaseException as error:  # the variants waiting say why, instead of waiting for ever
            self._error = error
        finally:
            with self._condition:
                self._finished = True
                self._condition.notify_all()
            from docpilot.run.forks import portable

            self._tell(("finished", None if self._error is None else portable(self._error)))

    def _tell(self, message: tuple) -> None:
        for listener in self.listeners:
            with contextlib.suppress(OSError):  # a child that ended early no longer listens
                listener(message)

    def wait(self, traces: list, interrupt: threading.Event | None = None) -> None:
        """Return once every one of ``traces`` has its ranking stored; raise what stopped the ranking, if anything."""
        wanted = {t.record.id for t in traces}
        with self._condition:
            while not wanted <= self._ready and not self._finished:
                if interrupt is not None and interrupt.is_set():
                    return  # the run is stopping: its own stages stop it
                self._condition.wait(timeout=0.2)
        if self._error is not None:
            raise self._error

    def finish(self) -> None:
        """Wait for the thread (after the variants, which have waited for every record already)."""
        self._thread.join()
        if self._error is not None:
            raise self._error


def rank_shared(jobs: list[EvalJob], progress: Progress,
                listeners: dict[str, list[Callable[[tuple], None]]] | None = None) -> dict[str, SharedRanking]:
    """Start ranking, once, the records of every retrieval setting two or more variants share; by setting.

    ``listeners`` are told, by setting, what is ranked (``SharedRanking.listeners``).
    """
    rankings = {setting: SharedRanking(members[0]) for setting, members in shared_settings(jobs).items()}
    for setting, ranking in rankings.items():
        ranking.listeners.extend((listeners or {}).get(setting, []))
        ranking.start(progress)
    return rankings


def shared_settings(jobs: list[EvalJob]) -> dict[str, list[EvalJob]]:
    """The retrieval settings two or more variants share, with their jobs.

    A run without a cache shares nothing: each variant ranks for itself.
    """
    groups: dict[str, list[EvalJob]] = {}
    for job in jobs:
        groups.setdefault(ranking_setting(job), []).append(job)
    return {setting: members for setting, members in groups.items()
            if len(members) > 1 and members[0].use_cache and members[0].runtime != "server"}


def ranking_setting(job: EvalJob) -> str:
    """What a job's rankings depend on besides the records: its docs and its retrieval settings."""
    return job.config.retrieval.model_dump_json() + job.config.corpus.model_dump_json()


def without_ranking_refresh(jobs: list[EvalJob], shared: Collection[str]) -> list[EvalJob]:
    """The jobs, without a refresh of rankings where the setting is shared: the shared ranking stores them."""
    # Rankings stored by the shared ranking: a variant refreshing retrieval would only rank them again.
    return [j.model_copy(update={"refresh": [s for s in j.refresh if s != "retrieve"]})
            if ranking_setting(j) in shared else j for j in jobs]
