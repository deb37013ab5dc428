"""The model stage over one shard, the way every run calls it, for tests that drive the stages by hand."""

from __future__ import annotations

from docpilot.assistant.workspace import Trace, Workspace
from docpilot.run.context import RunContext
from docpilot.run.pipeline import answer_shard, lookup_turns


def model_shard(ws: Workspace, traces: list[Trace], run: RunContext | None = None) -> list[Trace]:
    """Fill in the shard's cached turns, then answer the rest: the two calls the model stage makes.

    Stages given one ``run`` share its model lane, as the shards of a run do.
    """
    lookup_turns(ws, traces)
    return answer_shard(ws, traces, run=run)
