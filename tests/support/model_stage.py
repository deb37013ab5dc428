"""The model stage over one shard, the way every run calls it, for tests that drive the stages by hand."""

from __future__ import annotations

from docpilot.run.pipeline import answer_shard, lookup_turns
from docpilot.assistant.workspace import Trace, Workspace


def model_shard(ws: Workspace, traces: list[Trace]) -> list[Trace]:
    """Fill in the shard's cached turns, then answer the rest: the two calls the model stage makes."""
    lookup_turns(ws, traces)
    return answer_shard(ws, traces)
