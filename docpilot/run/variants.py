"""A run of several variants: each one an eval of its own, all at once, sharing what they share.

Every variant runs the job's records (one golden set, split and selection, one corpus),
so their rows pair up record by record. What they share is done once:

- the docs are loaded once, and an index once per retrieval setting (``open_workspace``
  gives a variant the corpus, and the index, of a workspace already open);
- retrieval runs once per distinct retrieval setting: the records of every setting that
  two or more variants share are ranked and stored on a thread of their own
  (``run.shared_ranking``), and each variant waits for the rankings of the shard it is about
  to look up and finds them in the stage cache, so its first turns go out while the
  rest is still being ranked;
- the model calls of every variant are in flight at the same time: each variant is an
  ``evaluate`` in a process of its own, forked once the job is built (``run.forks``;
  on threads of this process where the platform does not fork), with its own lane, so
  each endpoint keeps its own ``model.concurrency`` and three model-only variants take
  about as long as one (variants that share an endpoint split its concurrency,
  ``variant_jobs``);
- the stage cache is one store, so a re-run re-computes only the cells whose inputs
  changed, and a variant added to the config calls the model for its own records only.

The variants' reports are joined into one (``reports.variants.join_variants``) and
written once.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from docpilot.config.variants import Variant
from docpilot.progress import Progress, Sink, current
from docpilot.run.context import cancel_run
from docpilot.run.job import EvalJob
from docpilot.run.orchestrator import Orchestration
from docpilot.run.shared_ranking import rank_shared, ranking_setting, shared_settings, without_ranking_refresh
from docpilot.schema import Report

if TYPE_CHECKING:
    from docpilot.models.probe import Ready


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
        for position, i in enumerate(indexes):
            share = bound // len(indexes) + (1 if position < bound % len(indexes) else 0)
            model = jobs[i].config.model.model_copy(update={"concurrency": max(1, share)})
            jobs[i] = jobs[i].model_copy(update={"config": jobs[i].config.model_copy(update={"model": model})})
    return jobs


@contextlib.contextmanager
def variants_ahead(variants: list[Variant], *, calls_model: bool = True) -> Iterator[dict[str, Ready]]:
    """For the block (the job being built), what a run of several variants starts early; by variant, its ``Ready``.

    Every endpoint's probe is sent at once (``models.probe.ready_endpoint``), so that
    no variant spends a round trip on it once the run starts, and, where the variants
    will run in processes of their own, the language model starts loading in a helper
    process (``assistant.language.load_for_forks``). ``calls_model=False`` (a gate-only
    run, a running server measured) starts neither.
    """
    from docpilot.assistant import language
    from docpilot.models.probe import ready_endpoint
    from docpilot.run.forks import can_fork

    if not calls_model:
        yield {}
        return
    with contextlib.ExitStack() as stack:
        if can_fork():
            if language.load_for_forks():
                stack.callback(language.end_load_for_forks)
        else:
            language.preload(urgent=True)
        yield {v.name: stack.enter_context(ready_endpoint(v.config)) for v in variants}


def run_variants(job: EvalJob, variants: list[Variant], *, progress: Progress | None = None,
                 gate_variant: str | None = None, orchestration: Orchestration | None = None,
                 evaluate: Callable[..., tuple[Report, str]] | None = None,
                 ready: dict[str, Ready] | None = None) -> tuple[Report, str]:
    """Run every variant of ``job`` at once and write their joined report; the report and its path.

    Each variant runs in a process of its own where the platform forks (``run.forks``),
    else, or when ``evaluate`` is given (a variant's job to report, ``run.evaluation.
    evaluated`` by default), each on a thread of this process. ``progress`` shows each
    variant's stages under its name; ``ready`` holds the probes ``variants_ahead`` sent.
    """
    from docpilot.reports.report import write_report
    from docpilot.reports.variants import join_variants
    from docpilot.run.forks import can_fork

    progress = progress or current()
    jobs = variant_jobs(job, variants)
    started = time.perf_counter()
    scores = None
    readies = _checked(jobs, ready or {})
    if evaluate is None and can_fork():
        reports, ranked_here, scores = _in_processes(jobs, progress, orchestration, readies)
    else:
        reports, ranked_here = _on_threads(jobs, progress, orchestration, evaluate, readies)
    wall_ms = (time.perf_counter() - started) * 1000
    joined = join_variants(list(zip(variants, reports, strict=True)), gate_variant=gate_variant, wall_ms=wall_ms,
                           ranked_here=ranked_here, scores=scores)
    path = write_report(joined, job.out or f"{job.config.reports_dir}/{joined.run_id}.json")
    return joined, str(path)


def _checked(jobs: list[EvalJob], ready: dict[str, Ready]) -> dict[str, Ready | None]:
    """Each variant's probe, waited for here, before a variant starts (and before any fork: its thread has ended).

    An endpoint that cannot serve stops the run here, its error naming the variant. A
    ``local`` provider's server is not started here: the variant starts it itself.
    """
    from docpilot.models.probe import Ready

    checked: dict[str, Ready | None] = {}
    for one in jobs:
        probe = ready.get(one.variant or "")
        if probe is None or probe.costly():
            checked[one.variant or ""] = None
            continue
        try:
            probe()
        except BaseException as error:
            raise _naming(error, one.variant or "") from None
        # The job's own config: the variant's share of a shared endpoint's concurrency included.
        checked[one.variant or ""] = Ready(lambda config=one.config: config)
    return checked


def _waiting_for(ranking: Any) -> Callable[[Any], None]:
    """A run context's preparation: its stages wait for ``ranking`` (when there is one) before looking rankings up."""
    def prepare(context) -> None:
        if ranking is not None:
            context.before_ranking = lambda traces: ranking.wait(traces, context.interrupt)
    return prepare


def _on_threads(jobs: list[EvalJob], progress: Progress, orchestration: Orchestration | None,
                evaluate: Callable[..., tuple[Report, str]] | None, readies: dict[str, Ready | None]
                ) -> tuple[list[Report], dict[str, set[str]]]:
    """Each variant an ``evaluate`` on a thread of this process; their reports, and the records ranked here."""
    if evaluate is None:
        from docpilot.run.evaluation import evaluated as evaluate
    shared = rank_shared(jobs, Progress(_Labelled(progress.sink, "(shared)")))
    jobs = without_ranking_refresh(jobs, shared)
    reports: list[Report] = []
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="docpilot-variant") as pool:
        futures = [pool.submit(evaluate, j, progress=Progress(_Labelled(progress.sink, j.variant)),
                               orchestration=orchestration, prepare=_waiting_for(shared.get(ranking_setting(j))),
                               ready=readies.get(j.variant or ""))
                   for j in jobs]
        try:
            for future in futures:
                reports.append(future.result()[0])
            for ranking in shared.values():
                ranking.finish()
        except BaseException:
            for j in jobs:  # one variant failed, or Ctrl-C: the others stop too; answered turns stay stored
                cancel_run(j.run_key)
            raise
    return reports, {ranking.variant: ranking.computed for ranking in shared.values()}


def _in_processes(jobs: list[EvalJob], progress: Progress, orchestration: Orchestration | None,
                  readies: dict[str, Ready | None]
                  ) -> tuple[list[Report], dict[str, set[str]], dict[str, dict[str, dict[str, float]]]]:
    """Each variant in a forked process of its own (``run.forks``); their reports, the records ranked here,
    and each variant's outcome values for the paired tests (worked out by its process, beside the others).

    Every child is forked before this process starts a thread of the run: the shared
    ranking starts after, and tells the children what it has ranked.
    """
    from docpilot.assistant import language
    from docpilot.run import forks
    from docpilot.run.evaluation import calls_model

    _import_stages()
    shared = set(shared_settings(jobs))
    jobs = without_ranking_refresh(jobs, shared)
    children: list[forks.Child] = []
    inherited: list[int] = []
    with contextlib.ExitStack() as stack:
        # Started early by ``variants_ahead`` for the CLI; here for a caller of ``run_variants`` that did not.
        if any(calls_model(one) for one in jobs) and language.load_for_forks():
            stack.callback(language.end_load_for_forks)
        stack.enter_context(forks.children_stopped_on_exit(children))
        for one in jobs:
            run = _variant_in_child(one, orchestration, readies.get(one.variant or ""))
            children.append(forks.fork_variant(one.variant or "", run, shares_ranking=ranking_setting(one) in shared,
                                               inherited=inherited))
        sinks = {child.name: _Labelled(progress.sink, child.name) for child in children}

        def forward(child: forks.Child, kind: str, stage: str, count: int) -> None:
            (sinks[child.name].start if kind == "start" else sinks[child.name].advance)(stage, count)

        forks.collect(children, forward)
        listeners: dict[str, list[Callable[[tuple], None]]] = {}
        for one, child in zip(jobs, children, strict=True):
            if child.ranking is not None:
                listeners.setdefault(ranking_setting(one), []).append(child.ranking.send)
        rankings = rank_shared(jobs, Progress(_Labelled(progress.sink, "(shared)")), listeners)
        forks.reap(children)
        for ranking in rankings.values():
            ranking.finish()
        for child in children:
            if child.ranking is not None:
                child.ranking.close()
        failed = [child for child in children if child.error is not None]
        if failed:  # the error of the variant that failed first by itself, not of one stopped because of it
            first = ([child for child in failed if child.cause] or failed)[0]
            raise _naming(first.error, first.name)
    return ([child.result[0] for child in children], {r.variant: r.computed for r in rankings.values()},
            {child.name: child.result[1] for child in children})


def _import_stages() -> None:
    """Import here, once, the modules every variant's process runs its stages with, instead of in each child."""
    import importlib

    for module in ("docpilot.run.wiring", "docpilot.run.stages", "docpilot.run.rows", "docpilot.assistant.turn",
                   "docpilot.assistant.guard", "docpilot.models.prices", "metrics.slices"):
        importlib.import_module(module)
    with contextlib.suppress(ImportError):  # the lane's event loop, where it is installed
        importlib.import_module("uvloop")


def _naming(error: BaseException, variant: str) -> BaseException:
    """A variant's own error, its message starting with the variant's name (a run of several has several models)."""
    from docpilot.errors import DocpilotError
    from docpilot.run.forks import VariantProcessError

    if isinstance(error, DocpilotError) and not isinstance(error, VariantProcessError) and error.args \
            and isinstance(error.args[0], str):
        error.args = (f"variant {variant!r}: {error.args[0]}", *error.args[1:])
    return error


def _variant_in_child(job: EvalJob, orchestration: Orchestration | None, ready: Ready | None
                      ) -> Callable[..., tuple]:
    """What a variant's child runs: its job, its progress sent to the parent, its stages waiting on ``feed``;
    its report and its outcome values (``reports.compare.outcome_scores``)."""
    def run(sink: Sink, feed: Any) -> tuple[Report, dict[str, dict[str, float]]]:
        from docpilot.reports.compare import OutcomesAhead, outcome_scores
        from docpilot.run.evaluation import evaluated

        ahead = OutcomesAhead()
        waiting = _waiting_for(feed)

        def prepare(context) -> None:
            waiting(context)
            context.after_scoring = ahead.add  # each shard's outcomes while later shards wait on the model

        report = evaluated(job, progress=Progress(sink), orchestration=orchestration, prepare=prepare,
                           ready=ready)[0]
        return report, outcome_scores(report.rows, ahead)
    return run


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
