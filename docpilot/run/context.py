"""What one eval holds while it runs: its workspace, model lane, scores so far, progress, lead and interrupt.

Two evals in one process (two threads of a Python caller, a schedule beside a manual
run) must not see each other's state, so none of it lives in module globals: each
``evaluate`` opens a ``RunContext`` and every stage finds it by the job's ``run_key``
(``context_of``). The stage functions are called with a job and a shard only, on any
thread (Prefect runs them as task runs on its own threads), which is why the context is
looked up by key rather than handed down.

The one table of contexts is keyed by run and locked. A stage that runs in a process
where no eval was opened (a Dask worker) gets a context of its own for that run,
kept while the worker answers the run's shards (the last ``_WORKER_RUNS`` runs).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from docpilot.progress import Progress, current
from metrics.summary import Ahead

if TYPE_CHECKING:
    from docpilot.assistant.workspace import Workspace
    from docpilot.run.job import EvalJob

_WORKER_RUNS = 2  # as many as the workspaces a process keeps (assistant.workspace): each holds one


@dataclass(eq=False)
class RunContext:
    """One eval's state, from its start to its report."""

    key: str
    """The job's ``run_key``."""
    progress: Progress = field(default_factory=Progress)
    """Where the run's stages count what they finished."""
    interrupt: threading.Event = field(default_factory=threading.Event)
    """Set when the run is to stop (Ctrl-C, SIGTERM, ``cancel``): model stages that start later stop at once."""
    scored: Ahead = field(default_factory=Ahead)
    """The rows scored so far, with their metric values: the summary reads them, not the rows again."""
    lead: Any = None
    """The run's first shards, sent before the orchestrator was up (``wiring.Lead``), until the run takes them."""
    lanes: dict[int, Any] = field(default_factory=dict)
    """The open model lane (``lane.ModelLane``) of each workspace (by ``id``), shared by the run's model stages."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards ``lanes`` and ``lead``: stages of one run run on several threads."""
    trace: Any = None
    """The run's trace (``telemetry.tracing.RunTrace``) when tracing is configured: shards send their spans to it."""
    workspaces: dict[tuple, Workspace] = field(default_factory=dict)
    """The corpus, index and cache the run ranks with, by config and cache use, opened by its first stage."""
    before_ranking: Any = None
    """Called with a shard's traces before their rankings are looked up: a variant whose rankings another
    thread is storing waits here for them (``run.variants``); None for a run of one."""
    after_scoring: Any = None
    """Called with a shard's rows once they are scored: a variant's process works out their paired-test
    outcomes then, while the model answers later shards (``run.variants``); None for a run of one."""

    def cancel(self) -> None:
        """Stop the run: model stages stop waiting for turns in flight, later ones stop at once."""
        with self.lock:
            self.interrupt.set()
            lanes = list(self.lanes.values())
        for lane in lanes:
            lane.cancel()

    def take_lead(self, job: EvalJob) -> Any:
        """The lead sent for this job, once; None when there was none."""
        with self.lock:
            lead, self.lead = self.lead, None
        return lead if lead is not None and lead.job == job else None


_RUNS: dict[str, RunContext] = {}  # the evals open in this process, by run key
_WORKERS: OrderedDict[str, RunContext] = OrderedDict()  # runs this process only answers shards of
_LOCK = threading.Lock()


@contextlib.contextmanager
def opened(job: EvalJob, progress: Progress | None = None) -> Iterator[RunContext]:
    """Open the run's context for the block: every stage of ``job`` finds it by the job's run key."""
    context = RunContext(job.run_key, progress=progress or Progress())
    with _LOCK:
        if job.run_key in _RUNS:
            raise RuntimeError(f"the run {job.run_key} is already under way in this process")
        _RUNS[job.run_key] = context
    try:
        yield context
    finally:
        with _LOCK:
            _RUNS.pop(job.run_key, None)


def context_of(job: EvalJob) -> RunContext:
    """The context of the run ``job`` belongs to; where no eval opened it (a worker, a test driving
    the stages by hand), one made for it, counting into the calling thread's progress."""
    with _LOCK:
        context = _RUNS.get(job.run_key)
        if context is not None:
            return context
        context = _WORKERS.get(job.run_key)
        if context is None:
            context = _WORKERS[job.run_key] = RunContext(job.run_key, progress=current())
            while len(_WORKERS) > _WORKER_RUNS:
                _WORKERS.popitem(last=False)
        return context


def cancel_run(key: str) -> None:
    """Stop the run open under ``key`` in this process, if there is one (the variants of a run stop together)."""
    with _LOCK:
        context = _RUNS.get(key)
    if context is not None:
        context.cancel()


def stop_all() -> None:
    """A signal asked this process to stop: every run in it stops at once.

    Safe in a signal handler: it takes no lock the interrupted thread may hold (reading
    the tables is one step under the interpreter's lock), and only sets events. The
    KeyboardInterrupt the handler raises next stops each run and cancels its lanes.
    """
    for context in [*list(_RUNS.values()), *list(_WORKERS.values())]:
        context.interrupt.set()

