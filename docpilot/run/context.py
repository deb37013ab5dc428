"""What one eval holds while it runs: its job, workspace, model endpoint, lanes, scores so far and stop flag.

A ``RunContext`` is made by ``evaluate`` (or by a Dask worker for the shard it was sent)
and handed to every step of the road (``run.road``): nothing of a run lives in a module
global, so two evals in one process (two threads of a Python caller, the variants of
one run) keep apart without looking each other up.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from docpilot.metrics.summary import Ahead
from docpilot.progress import Progress

if TYPE_CHECKING:
    from docpilot.assistant.workspace import Workspace
    from docpilot.config.model import ModelConfig
    from docpilot.run.job import EvalJob
    from docpilot.run.variants import SharedRanking


@dataclass
class FirstReply:
    """A target's first reply in a run, which its shards share: read strictly, so a wrong path or credential
    stops the run there (``targets.ask.ask_target``); every question still goes out at once."""

    came: threading.Event = field(default_factory=threading.Event)
    """Set once a reply has come: later ones are read as answers or error rows."""
    failed: Exception | None = None
    """The fault the first reply showed (a ``TargetReplyError``): no shard sends another question."""


@dataclass(eq=False)
class RunContext:
    """One eval's state, from its start to its report."""

    key: str
    """The job's ``run_key``."""
    job: EvalJob | None = None
    """The run's job; None for a bare context (a test driving the model lane by hand)."""
    workspace: Workspace | None = None
    """The corpus, index and cache the run ranks with, opened once when the run starts."""
    progress: Progress = field(default_factory=Progress)
    """Where the run's stages count what they finished."""
    interrupt: threading.Event = field(default_factory=threading.Event)
    """Set when the run is to stop (Ctrl-C, SIGTERM, ``cancel``): model stages that start later stop at once.
    The caller may hand in its own (the command line's signal handler sets it; the variants of a run share one)."""
    scored: Ahead = field(default_factory=Ahead)
    """The rows scored so far, with their metric values: the summary reads them, not the rows again."""
    lanes: dict[int, Any] = field(default_factory=dict)
    """The open model lane (``lane.ModelLane``) of each workspace (by ``id``), shared by the run's model stages."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards ``lanes``: the run's shards run on several threads."""
    trace: Any = None
    """The run's trace (``telemetry.tracing.RunTrace``) when tracing is configured: shards send their spans to it."""
    shared_ranking: SharedRanking | None = None
    """For a variant whose retrieval setting others share: the first of them ranks, the others wait for
    its rankings, so the variants rank each record once (``run.variants``)."""
    asking: threading.BoundedSemaphore | None = None
    """The server runtime's slots: ``model.concurrency`` questions in flight across the shards asking at once."""
    first_reply: FirstReply = field(default_factory=FirstReply)
    """The server runtime's first reply: read strictly, across the shards asking at once."""
    endpoint_ready: bool = False
    """Whether the model endpoint needs no (more) checking: set once probed, or for a job whose config
    already points at a checked endpoint (a Dask worker's)."""
    _model: ModelConfig | None = None
    _endpoint_lock: threading.Lock = field(default_factory=threading.Lock)
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def model_settings(self) -> ModelConfig:
        """The model settings turns are sent with; the first call probes the endpoint (and starts the local
        provider's server), so a run that sends no turn sends no request (ConfigError when it cannot serve)."""
        with self._endpoint_lock:  # the first shard to send a turn probes; the others wait for its answer
            if self._model is None:
                config = self.job.config
                if not self.endpoint_ready:
                    from docpilot.models.probe import ready_endpoint

                    config = self._stack.enter_context(ready_endpoint(config))()
                self._model, self.endpoint_ready = config.model, True
            return self._model

    def cancel(self) -> None:
        """Stop the run: model stages stop waiting for turns in flight, later ones stop at once."""
        with self.lock:
            self.interrupt.set()
            lanes = list(self.lanes.values())
        for lane in lanes:
            lane.cancel()

    def close(self) -> None:
        """Stop what the run started for its turns (the local provider's server)."""
        self._stack.close()
