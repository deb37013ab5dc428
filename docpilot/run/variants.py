"""A run of several variants: each one an eval of its own, all at once, sharing what they share.

Every variant runs the job's records (one golden set, split and selection, one corpus),
so their rows pair up record by record. What they share is done once:

- the docs are loaded once, and an index once per retrieval setting (``open_workspace``
  gives a variant the corpus, and the index, of a workspace already open);
- retrieval runs once per distinct retrieval setting: before the variants start, the
  records of every setting that two or more variants share are ranked and stored, and
  each variant then finds its rankings in the stage cache;
- the model calls of every variant are in flight at the same time: each variant is an
  ``evaluate`` on a thread of its own, with its own lane, so each endpoint keeps its own
  ``model.concurrency`` and three model-only variants take about as long as one;
- the stage cache is one store, so a re-run re-computes only the cells whose inputs
  changed, and a variant added to the config calls the model for its own records only.

The variants' reports are joined into one (``reports.variants.join_variants``) and
written once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from docpilot.config.variants import Variant
from docpilot.progress import Progress, Sink, current
from docpilot.run.context import cancel_run
from docpilot.run.job import EvalJob, job_records
from docpilot.run.orchestrator import Orchestration
from docpilot.schema import Report


def variant_jobs(job: EvalJob, variants: list[Variant]) -> list[EvalJob]:
    """One job per variant: the run's job with the variant's configuration, name and run key."""
    return [job.model_copy(update={"config": v.config, "variant": v.name, "run_key": uuid.uuid4().hex})
            for v in variants]


def rank_shared(jobs: list[EvalJob]) -> dict[str, tuple[str, set[str]]]:
    """Rank and store, once, the records of every retrieval setting two or more variants share.

    Returns, per shared setting (``ranking_setting``), the variant that ranked for it
    (the first) and the ids of the records ranked now, which its rows then count as
    computed. A run without a cache shares nothing: each variant ranks for itself.
    """
    from docpilot import progress
    from docpilot.assistant.workspace import open_workspace
    from docpilot.run.pipeline import lookup_rankings, rank_shard, start_traces

    groups: dict[str, list[EvalJob]] = {}
    for job in jobs:
        groups.setdefault(ranking_setting(job), []).append(job)
    ranked: dict[str, tuple[str, set[str]]] = {}
    for setting, members in groups.items():
        first = members[0]
        if len(members) < 2 or not first.use_cache or first.runtime == "server":
            continue
        workspace = open_workspace(first.config, use_cache=True, fingerprint=first.corpus_fingerprint)
        traces = start_traces(job_records(first))
        todo = lookup_rankings(workspace, traces, refresh="retrieve" in first.refresh)
        progress.start("retrieve", len(todo))
        rank_shard(workspace, [traces[p] for p in todo])
        ranked[setting] = (first.variant or "", {traces[p].record.id for p in todo})
    return ranked


def ranking_setting(job: EvalJob) -> str:
    """What a job's rankings depend on besides the records: its docs and its retrieval settings."""
    return job.config.retrieval.model_dump_json() + job.config.corpus.model_dump_json()


def run_variants(job: EvalJob, variants: list[Variant], *, progress: Progress | None = None,
                 gate_variant: str | None = None, orchestration: Orchestration | None = None,
                 evaluate: Callable[..., tuple[Report, str]] | None = None) -> tuple[Report, str]:
    """Run every variant of ``job`` at once and write their joined report; the report and its path.

    ``progress`` shows each variant's stages under its name. ``evaluate`` runs one
    variant's job (``run.evaluation.evaluated`` by default, inline).
    """
    from docpilot import progress as progress_module
    from docpilot.reports.report import write_report
    from docpilot.reports.variants import join_variants

    if evaluate is None:
        from docpilot.run.evaluation import evaluated as evaluate
    progress = progress or current()
    jobs = variant_jobs(job, variants)
    started = time.perf_counter()
    with progress_module.counting(Progress(_Labelled(progress.sink, "(shared)"))):
        ranked = rank_shared(jobs)
    # Rankings stored just now: a variant refreshing retrieval would only rank them again.
    jobs = [j.model_copy(update={"refresh": [s for s in j.refresh if s != "retrieve"]})
            if ranking_setting(j) in ranked else j for j in jobs]
    reports: list[Report] = []
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="docpilot-variant") as pool:
        futures = [pool.submit(evaluate, j, progress=Progress(_Labelled(progress.sink, j.variant)),
                               orchestration=orchestration) for j in jobs]
        try:
            for future in futures:
                reports.append(future.result()[0])
        except BaseException:
            for j in jobs:  # one variant failed, or Ctrl-C: the others stop too; answered turns stay stored
                cancel_run(j.run_key)
            raise
    wall_ms = (time.perf_counter() - started) * 1000
    ranked_here = {name: ids for name, ids in ranked.values()}
    joined = join_variants(list(zip(variants, reports, strict=True)), gate_variant=gate_variant, wall_ms=wall_ms,
                           ranked_here=ranked_here)
    path = write_report(joined, job.out or f"{job.config.reports_dir}/{joined.run_id}.json")
    return joined, str(path)


class _Labelled:
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
