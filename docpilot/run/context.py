"""What one eval holds while it runs (job, workspace, assistant, limiter, scores so far, stop flag), and what
every assistant does for the road (``Assistant``; chosen by ``run.assistants.assistant_for``).

A ``RunContext`` is made by ``evaluate`` (or by a Dask worker for the shard it was sent)
and handed to every step of the road (``run.road``): nothing of a run lives in a module
global, so two evals in one process (two threads of a Python caller, the variants of
one run) keep apart without looking each other up. What belongs to whoever answers
(model clients, a server started for the run, a target's endpoint) is the assistant's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from docpilot.metrics.summary import Ahead
from docpilot.progress import Progress
from docpilot.run.limiter import Limiter

if TYPE_CHECKING:
    from docpilot.assistant.workspace import Trace, Workspace
    from docpilot.run.job import EvalJob
    from docpilot.telemetry.tracing import RunTrace


class Assistant:
    """What every assistant does for the road; each fills the traces it is given and returns them."""

    ranks_here = False
    """Whether the run ranks sections in this process (and so opens the index)."""
    stage_labels: dict[str, str] = {}  # noqa: RUF012  (read only)
    """What the run's stages are shown as, where they are not ``retrieve`` and ``model``."""

    def open(self, run: RunContext) -> None:
        """Start what the run needs before its first shard (a server for the run, say)."""

    def rank(self, run: RunContext, traces: list[Trace]) -> list[Trace]:
        """Each trace's ranking alone (``--gate-only``)."""
        raise NotImplementedError

    def answer(self, run: RunContext, traces: list[Trace]) -> list[Trace]:
        """Each trace's ranking, prompt and turn; with ``model.repeat`` above 1, each sample a trace."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop waiting for the questions in flight (the run is stopping)."""

    def close(self) -> None:
        """Close what the assistant opened for the run; every answered turn is stored by then."""


@dataclass(eq=False)
class RunContext:
    """One eval's state, from its start to its report."""

    job: EvalJob
    """The run's job."""
    workspace: Workspace
    """The corpus, index and cache the run ranks with, opened once when the run starts."""
    assistant: Assistant
    """Who answers the run's questions (``run.assistants``), chosen once from the job (``assistant_for``)."""
    limiter: Limiter
    """The run's event loop and its bound on questions in flight, which every question holds a slot of."""
    progress: Progress = field(default_factory=Progress)
    """Where the run's stages count what they finished."""
    interrupt: threading.Event = field(default_factory=threading.Event)
    """Set when the run is to stop (Ctrl-C, SIGTERM, ``cancel``): steps that start later stop at once.
    The caller may hand in its own (the command line's signal handler sets it; the variants of a run share one)."""
    scored: Ahead = field(default_factory=Ahead)
    """The rows scored so far, with their metric values: the summary reads them, not the rows again."""
    trace: RunTrace | None = None
    """The run's trace when tracing is configured: shards send their spans to it."""

    def cancel(self) -> None:
        """Stop the run: questions in flight are dropped, later steps stop at once; answered turns stay stored."""
        self.interrupt.set()
        self.assistant.cancel()
        self.limiter.cancel()

    def close(self) -> None:
        """Close what the run opened for its questions: the assistant's clients, then the run's loop."""
        try:
            self.assistant.close()
        finally:
            self.limiter.close()
