"""A run of several variants: each one an eval of its own, all at once, sharing what they share.

Every variant runs the job's records (one golden set, split and selection, one corpus),
so their rows pair up record by record. ``evaluate(job, variants=...)`` runs each
variant's shards down the road (``run.road``) on threads of one process, all at once;
this module holds what they share:

- the docs are loaded once, and an index once per retrieval setting (``open_workspace``
  gives a variant the corpus, and the index, of a workspace already open);
- retrieval runs once per distinct retrieval setting (``SharedRanking``): the first
  variant of a setting ranks and stores, and the others wait for the rankings of the
  shard they are about to look up and find them in the stage cache;
- the model calls of every variant are in flight at the same time, each variant with its
  own limiter, so each endpoint keeps its own ``model.concurrency`` (variants that share
  an endpoint split it, ``variant_jobs``, by ``run.limiter.split``) and three model-only
  variants take about as long as one;
- the stage cache is one store, so a re-run re-computes only the cells whose inputs
  changed, and a variant added to the config calls the model for its own records only.

The variants' reports are joined into one (``reports.variants.join_variants``) and
written once.
"""

from __future__ import annotations

import threading
import uuid

from docpilot.config.variants import Variant
from docpilot.progress import Sink
from docpilot.run.job import EvalJob
from docpilot.run.limiter import split


def variant_jobs(job: EvalJob, variants: list[Variant]) -> list[EvalJob]:
    """One job per variant: the run's job with the variant's configuration, name and run key.

    Variants that call the same endpoint (an ``openai`` provider at one ``base_url``)
    split its ``model.concurrency`` between them, so the endpoint sees the bound it was
    given, not a multiple of it; each other endpoint keeps its own.
    """
    jobs = [job.model_copy(update={"config": v.config, "variant": v.name, "run_key": uuid.uuid4().hex})
            for v in variants]
    by_endpoint: dict[str, list[int]] = {}
    for index, one in enumerate(jobs):
        model = one.config.model
        if model.provider == "openai" and model.base_url:
            by_endpoint.setdefault(model.base_url.rstrip("/"), []).append(index)
    for indexes in by_endpoint.values():
        if len(indexes) < 2:
            continue
        bound = min(jobs[i].config.model.concurrency for i in indexes)
        for i, share in zip(indexes, split(bound, len(indexes)), strict=True):
            model = jobs[i].config.model.model_copy(update={"concurrency": max(1, share)})
            jobs[i] = jobs[i].model_copy(update={"config": jobs[i].config.model_copy(update={"model": model})})
    return jobs


class SharedRanking:
    """The rankings of one retrieval setting that several variants share: ranked by the first of them.

    The first variant's shards rank and store as a run of one does, and say which records
    are ranked (``ranked``); the others' shards wait for theirs (``wait``) before they look
    them up, so each record is ranked once and the others find it in the stage cache.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        """The variant that ranks."""
        self.computed: set[str] = set()
        """Ids of the records ranked here (the others were stored already)."""
        self._ready: set[str] = set()
        self._condition = threading.Condition()

    def ranked(self, ids: list[str]) -> None:
        """The owner stored the rankings of these records."""
        with self._condition:
            self._ready.update(ids)
            self._condition.notify_all()

    def wait(self, ids: list[str], interrupt: threading.Event) -> None:
        """Return once every one of ``ids`` has its ranking stored, or the run is stopping."""
        wanted = set(ids)
        with self._condition:
            while not wanted <= self._ready and not interrupt.is_set():
                self._condition.wait(timeout=0.2)  # wakes on a stop too, which sets no condition


def shared_rankings(jobs: list[EvalJob]) -> dict[str, SharedRanking]:
    """By variant name, the ranking it shares with others of the same retrieval setting (none: not listed).

    A run without a cache shares nothing: each variant ranks for itself.
    """
    groups: dict[str, list[EvalJob]] = {}
    for job in jobs:
        groups.setdefault(ranking_setting(job), []).append(job)
    shared: dict[str, SharedRanking] = {}
    for members in groups.values():
        if len(members) < 2 or not members[0].use_cache:
            continue
        ranking = SharedRanking(members[0].variant or "")
        shared.update((member.variant or "", ranking) for member in members)
    return shared


def ranking_setting(job: EvalJob) -> str:
    """What a job's rankings depend on besides the records: its docs and its retrieval settings."""
    return job.config.retrieval.model_dump_json() + job.config.corpus.model_dump_json()


def naming(error: BaseException, variant: str) -> BaseException:
    """A variant's own error, its message starting with the variant's name (a run of several has several models)."""
    from docpilot.errors import DocpilotError

    if isinstance(error, DocpilotError) and error.args and isinstance(error.args[0], str):
        error.args = (f"variant {variant!r}: {error.args[0]}", *error.args[1:])
    return error


class Labelled:
    """A progress sink that names the variant beside each stage: ``model top3``."""

    def __init__(self, sink: Sink | None, name: str | None) -> None:
        self._sink = sink
        self._name = name or ""

    def start(self, stage: str, total: int) -> None:
        if self._sink is not None:
            self._sink.start(f"{stage} {self._name}", total)

    def advance(self, stage: str, count: int = 1) -> None:
        if self._sink is not None:
            self._sink.advance(f"{stage} {self._name}", count)

    def close(self) -> None:
        return None  # the shared sink is closed by whoever opened it
