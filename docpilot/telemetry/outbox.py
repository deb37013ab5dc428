"""An eval's spans leave through a process of their own, which lays them out, encodes them and sends them.

A traced run would otherwise pay for its trace in its own process: encoding its
spans to protobuf with the SDK's exporter is CPU work, and the run's model client
wants the interpreter at that moment. Here the run hands over each scored shard's
rows as they are (pickled, which is cheap beside encoding the spans) and goes on; the
child does the rest on another core, and the run's only wait is for the last part at
its end. ``python -m benchmarks.tracing_overhead`` measures what tracing costs a run,
with this process and with the same work on a thread of the run's own process
(docs/architecture.md#measurements).

The parent writes pickled frames (``processes.MessagePipe``) to the child's standard input, from
a thread of its own so that a child still starting never blocks the run:

1. ``("hello", tracing, trace_id, root_id)``, once;
2. ``("records", rows, gate_only, model)``, a shard's scored rows, any number of times;
3. ``("finish", root_spans, rows, gate_only, model)``: the run's root and report spans,
   and the rows not sent yet; then the parent closes the pipe.

At the end of its input the child writes one JSON line to its standard output: how
many spans it made, and None or why they were not all sent. Its standard error is
kept for the warning should it end without that line. It is started with the
parent-death signal (``docpilot.processes.start_child``) and ends at the end of its
input anyway, so it never outlives the run.

    python -m docpilot.telemetry.outbox   # the child; reads frames on stdin
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from docpilot.processes import MessagePipe, start_child, stop_child
from docpilot.telemetry.settings import Tracing

_STARTUP_S = 5.0
"""How long the child may take, beyond the collector's timeout, to import, encode the last part and say so."""


class Outbox:
    """The parent's end: starts the child, hands it frames without waiting, and collects its last word."""

    def __init__(self, tracing: Tracing, trace_id: int, root_id: int) -> None:
        self.tracing = tracing
        self._problem: str | None = None
        self._frames: queue.Queue[bytes | None] = queue.Queue()
        root = str(Path(__file__).resolve().parents[2])  # the folder holding ``docpilot`` and ``metrics``
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            self._child: subprocess.Popen | None = start_child(
                [sys.executable, "-m", "docpilot.telemetry.outbox"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=root)
        except OSError as error:
            self._child, self._problem = None, f"the process that sends them did not start ({error})"
            return
        self._writer = threading.Thread(target=self._write, name="docpilot-trace-outbox", daemon=True)
        self._writer.start()
        self.put(("hello", tracing, trace_id, root_id))

    def put(self, frame: tuple) -> None:
        """Queue one frame for the child, pickled now; returns at once."""
        if self._child is not None:
            self._frames.put(MessagePipe.encode(frame))

    def _write(self) -> None:
        assert self._child is not None and self._child.stdin is not None
        pipe = MessagePipe(self._child.stdin)
        try:
            while (frame := self._frames.get()) is not None:
                pipe.write(frame)
        except (BrokenPipeError, OSError):
            pass  # the child ended early: ``close`` reports what it said
        finally:
            pipe.close()

    def close(self, last: tuple) -> tuple[int, str | None]:
        """Hand over the last frame and wait for the child's word: the spans made, and None or why not all were sent.

        Waits at most the collector's timeout and a few seconds; a child still busy then
        is stopped, and the answer says it did not finish in time.
        """
        if self._child is None:
            return 0, self._problem
        self.put(last)
        self._frames.put(None)
        deadline = self.tracing.timeout_s + _STARTUP_S
        started = time.monotonic()
        self._writer.join(deadline)
        self._child.stdin = None  # the writer's to close: ``communicate`` is to read only
        try:
            out, err = self._child.communicate(timeout=max(deadline - (time.monotonic() - started), 0.1))
        except subprocess.TimeoutExpired:
            stop_child(self._child, grace_s=1.0)
            return 0, f"no answer within {self.tracing.timeout_s:g} s"
        try:
            word = json.loads(out.decode().strip().splitlines()[-1])
            return int(word["spans"]), word["failure"]
        except (IndexError, ValueError, KeyError, TypeError):
            said = err.decode(errors="replace").strip().splitlines()
            return 0, (f"the process that sends them ended early (exit code {self._child.returncode})"
                       + (f": {said[-1]}" if said else ""))


def _frames(pipe: MessagePipe) -> Any:
    """The frames on ``pipe``, until it ends."""
    while True:
        try:
            yield pipe.receive()
        except EOFError:
            return


def main() -> None:
    """The child: make each part's spans, send them, and say at the end how it went."""
    from docpilot.telemetry.otlp import Sender, root_context
    from docpilot.telemetry.runs import lay_out_records

    frames = _frames(MessagePipe(sys.stdin.buffer))
    hello = next(frames, None)
    if hello is None or hello[0] != "hello":
        return
    _, tracing, trace_id, root_id = hello
    sender = Sender(tracing)
    outer = root_context(trace_id, root_id)
    for frame in frames:
        if frame[0] == "records":
            _, rows, gate_only, model = frame
            spans = lay_out_records(rows, gate_only=gate_only, model=model, trace_id=trace_id)
            sender.send(sender.maker.make(spans, trace_id=trace_id, outer=outer))
        elif frame[0] == "finish":
            _, spans, rows, gate_only, model = frame
            spans.extend(lay_out_records(rows, gate_only=gate_only, model=model, trace_id=trace_id, parent=0))
            sender.send(sender.maker.make(spans, trace_id=trace_id, first_id=root_id))
    count, failure = sender.finish()
    sys.stdout.write(json.dumps({"spans": count, "failure": failure}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
