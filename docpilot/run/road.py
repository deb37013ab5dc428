"""The road: a shard of records through ask → render → score, written once, and the steps it takes.

``travel`` is the only place the order is written. Every way of running an eval calls
it, one shard at a time: inline on a few threads of this process, a Prefect task run
per shard, a Dask worker per shard, each variant of a run on threads of its own
(``flows.plan`` chooses). They decide where and how many shards travel at once, never
the order of the steps. Who answers is the run's assistant (``run.assistants``):
DocPilot's own (retrieve → prime → model, here), its server, or a target.

The steps below are plain functions over a shard's traces. The expensive ones look
each record up in the stage cache first and store what they compute as soon as it
exists (a ranking with its shard, a turn the moment it arrives), so a crash loses no
finished model call and a re-run computes only what changed. Each entry is read back
checked against the shape written here: a cache restored from elsewhere may hold
anything, and an entry of another shape is a miss (``StageCache.get``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NotRequired

from pydantic import TypeAdapter
from typing_extensions import TypedDict  # pydantic reads this TypedDict, not typing's, before Python 3.12

from docpilot import progress
from docpilot.assistant.language import RULE as LANGUAGE_RULE
from docpilot.assistant.language import detect_language
from docpilot.assistant.language import ready as language_ready
from docpilot.assistant.primer import PROMPT_VERSION, history_messages
from docpilot.assistant.turn import panel, primed, search_query
from docpilot.assistant.workspace import Trace, Workspace
from docpilot.cache import cache_key
from docpilot.golden.gold_state import gold_states
from docpilot.models.base import REPLY_FIELDS, Prompt, Reply, paints, read_reply
from docpilot.models.registry import model_identity
from docpilot.retrieval.rankers import Hit
from docpilot.run.limiter import Interrupted
from docpilot.run.rows import build_rows
from docpilot.schema import AttackProbe, GoldenRecord, Row

if TYPE_CHECKING:
    from docpilot.run.context import RunContext

GOLD_DEPTH = 100
"""How deep each ranking is searched to find a positive's first gold section (the row's ``gold_rank``).

The metrics still read the top 8 only; a hundred places tell a gold section that an
edit would lift (rank 12) from one no edit of wording reaches (not in the first 100)."""


def travel(run: RunContext, records: Sequence[GoldenRecord | AttackProbe]) -> list[Row]:
    """Take one shard of the run's records down the road; their report rows, scored."""
    check_running(run)
    traces = start_traces(records)
    if run.job.gate_only:
        return score(run, in_turns(traces, lambda wave: run.assistant.rank(run, wave)))
    traces = in_turns(traces, lambda wave: run.assistant.answer(run, wave))
    return score(run, render_shard(run.workspace, traces))


def in_turns(traces: list[Trace], ask: Callable[[list[Trace]], list[Trace]]) -> list[Trace]:
    """Ask every trace, a conversation's turns in their order: all first turns of the shard, then all second
    turns, each carrying the turns before it (``carry``); the traces back in record order.

    A shard of single questions is one wave, asked as it is. A conversation is never cut
    between shards (``run.job.shards``), so every turn finds the ones before it here.
    With ``model.repeat`` above 1, a follow-up carries the first sample's answer.
    """
    waves = sorted({trace.record.turn or 1 for trace in traces})
    if waves == [1]:
        return ask(traces)
    asked: dict[tuple[str, int], Trace] = {}
    answered: list[Trace] = []
    for position in waves:
        wave = [trace for trace in traces if (trace.record.turn or 1) == position]
        for trace in wave:
            carry(trace, asked)
        for trace in ask(wave):
            answered.append(trace)
            if trace.record.conversation is not None and not trace.sample:
                asked[trace.record.conversation, trace.record.turn] = trace
    order = {trace.record.id: index for index, trace in enumerate(traces)}
    return sorted(answered, key=lambda trace: (order[trace.record.id], trace.sample or 0))


def carry(trace: Trace, asked: dict[tuple[str, int], Trace]) -> None:
    """Give a follow-up the turns before it: each question with the golden set's ``answer_given``, else the
    answer the assistant gave it in this run; the search query that reads them; the thread it is in."""
    record = trace.record
    if not record.earlier:
        return
    earlier = []
    for position, turn in enumerate(record.earlier, start=1):
        before = asked.get((record.conversation, position))
        answer = turn.answer_given
        if answer is None and before is not None and before.turn is not None and before.turn.error is None:
            answer = before.turn.answer
        earlier.append((turn.question, answer))
        if before is not None and before.thread is not None:
            trace.thread = before.thread
    trace.earlier = earlier
    trace.query = search_query(record.question, earlier)


def score(run: RunContext, traces: list[Trace]) -> list[Row]:
    """One report row per trace, with what the metrics read, and its gold's state by the set's lock."""
    meter = run.workspace.bias
    stale = (gold_states(run.job.golden, [t.record for t in traces], run.workspace.corpus)
             if run.job.set == "golden" else None)  # a set without a lock: one stat
    if run.job.gate_only:
        return build_rows(traces, gate_only=True, meter=meter, gold_states=stale)
    from docpilot.assistant.language import corpus_language

    return build_rows(traces, corpus_language=corpus_language(run.workspace.corpus),
                      model=run.job.config.model, meter=meter, gold_states=stale)


def check_running(run: RunContext) -> None:
    """Interrupted when the run is stopping."""
    if run.interrupt.is_set():
        raise Interrupted("the run was interrupted; the turns answered so far are stored")


def start_traces(records: Sequence[GoldenRecord | AttackProbe]) -> list[Trace]:
    """Wrap golden records or attack probes for the first step."""
    return [_trace(r) for r in records]


def sampled(traces: list[Trace], sample: int) -> list[Trace]:
    """Fresh traces of the shard's records, as sample ``sample`` of each (an assistant asked over HTTP
    retrieves for each sample)."""
    fresh = start_traces([trace.attack or trace.record for trace in traces])
    for trace, given in zip(fresh, traces, strict=True):
        trace.sample, trace.earlier, trace.query, trace.thread = sample, given.earlier, given.query, given.thread
    return fresh


def _trace(record: GoldenRecord | AttackProbe) -> Trace:
    if isinstance(record, GoldenRecord):
        return Trace(record=record)
    question = GoldenRecord(id=record.id, question=record.prompt, split=record.split,
                            language=record.language, tags=record.tags)
    return Trace(record=question, attack=record)


def rank_shard(ws: Workspace, traces: list[Trace]) -> list[Trace]:
    """Rank sections for every given trace, cached or not, and store the rankings in the cache (if any).

    Later stages read the ``top_k`` hits; the ids after them, to ``GOLD_DEPTH``, give only ``gold_rank``.
    """
    top_k = ws.config.retrieval.top_k
    depth = max(top_k, GOLD_DEPTH)
    for trace in traces:
        began = time.time()  # when, for a trace; the duration from the monotonic clock
        start = time.perf_counter()
        hits, deeper = ws.retriever.search_deeper(trace.query or trace.record.question, scope=trace.record.scope,
                                                  k=top_k, depth=depth)
        trace.retrieve_ms = (time.perf_counter() - start) * 1000
        trace.timeline["retrieve"] = (began, began + trace.retrieve_ms / 1000)
        trace.hits = [{"section_id": h.section_id, "chunk_id": h.chunk_id, "score": h.score} for h in hits]
        trace.deeper, trace.depth = deeper, depth
        progress.advance("retrieve")
    store_rankings(ws, traces)
    return traces


def prime_shard(ws: Workspace, traces: list[Trace]) -> list[Trace]:
    """Build each record's prompt from its top sections, and apply the retrieval gate."""
    k = ws.config.prime.top_k
    for trace in traces:
        began = time.time()
        step = primed(ws, trace.record.question, [Hit(**h) for h in trace.hits[:k]],  # only the primed ones
                      history=history_messages(trace.earlier))
        trace.prompt, trace.gate_refused = step.prompt, step.gate_refused
        trace.turn_key = None  # a new prompt, a new key
        # The first priming is the one the model waited for (a run primes its lead's shards again).
        trace.timeline.setdefault("prime", (began, time.time()))
    return traces


def _model_key(ws: Workspace, prompt: Prompt, sample: int | None = None) -> str:
    if ws._identity is None:
        ws._identity = model_identity(ws.config.model, corpus_fingerprint=ws.corpus.fingerprint,
                                      chunk_words=ws.config.corpus.chunk_words)
    version = (PROMPT_VERSION, ws.config.prime.prompt_version)
    if not sample:  # the first sample is the turn a run of one asks: its key, and its stored reply, are the same
        return cache_key("model", version, prompt.messages, ws._identity)
    return cache_key("model", version, prompt.messages, ws._identity, {"sample": sample})


def turn_key(ws: Workspace, trace: Trace) -> str:
    """The cache key of the trace's turn, worked out once per prompt and sample: looking it up, asking and
    storing share it. Each sample of a repeated turn has its own key, so each is asked and stored apart."""
    if trace.turn_key is None:
        trace.turn_key = _model_key(ws, trace.prompt, trace.sample)
    return trace.turn_key


REWRITE = ("Rewrite the user's last question so that it can be understood without the conversation before it: "
           "name what its words such as it, that or the other one refer to. Reply with the rewritten question "
           "alone, on one line.")
"""What the model is told when it rewrites a follow-up for the search (``retrieval.follow_ups: model``)."""


def rewrite_traces(ws: Workspace, traces: list[Trace]) -> list[Trace]:
    """For each follow-up, a trace whose prompt asks the model to rewrite it into a question that stands alone:
    the conversation's turns as chat messages, then the question. Its cache key is the model's key of those
    messages, apart from any answer's (``rewrite``), so the rewrite is asked once and stored like a turn."""
    rewrites = []
    for trace in traces:
        messages = [{"role": "system", "content": REWRITE}, *history_messages(trace.earlier),
                    {"role": "user", "content": trace.record.question}]
        prompt = Prompt(question=trace.record.question, sources=[], messages=messages)
        rewrite = Trace(record=trace.record, prompt=prompt)
        rewrite.turn_key = _model_key(ws, prompt, None) + ":rewrite"
        rewrites.append(rewrite)
    return rewrites


def rewritten(rewrite: Trace) -> str | None:
    """The question a rewrite turn gave, on one line; None when it gave none (an error, a refusal, nothing)."""
    turn = rewrite.turn
    if turn is None or turn.error is not None or turn.refused or not (turn.answer or "").strip():
        return None
    return " ".join(turn.answer.split())[:2000]


def sample_traces(traces: list[Trace], repeat: int) -> list[Trace]:
    """Each primed trace ``repeat`` times, as samples 0 to ``repeat - 1`` of its turn; the traces as they are for one.

    The samples share the record's ranking, prompt and gate decision (retrieval and
    priming ran once); each is asked of the model apart. A record the gate refused, or
    with no prompt, is asked nothing, and is one row whatever ``repeat`` is.
    """
    if repeat <= 1:
        return traces
    sampled: list[Trace] = []
    for trace in traces:
        trace.sample, trace.turn_key = 0, None
        sampled.append(trace)
        if trace.gate_refused or trace.prompt is None:
            continue
        sampled += [dataclasses.replace(trace, sample=s, turn_key=None, cached=list(trace.cached),
                                        timeline=dict(trace.timeline), languages={})
                    for s in range(1, repeat)]
    return sampled


def _languages(trace: Trace) -> dict[str, str | None]:
    # Detected once, when the turn is new; a re-run reads them from the cache. The answer's
    # is detected for a refusal too: a later rule may read the same reply as an answer.
    turn = trace.turn
    texted = turn is not None and turn.error is None and paints(turn.answer)
    return {
        "question": detect_language(trace.record.question),
        "answer": detect_language(turn.answer) if texted else None,
        "rule": LANGUAGE_RULE,
    }


class TurnWriter:
    """Stores each answered turn the moment it arrives, on the lane's writer thread.

    A crash later in the run loses nothing. Errored turns are not kept, so a re-run
    retries them. Each stored turn carries the languages of its question and answer,
    so a re-run need not load the language model; the first turns of a run may arrive
    while that model still loads, and they are stored at once without languages and
    stored again with them once it is there, at the latest when the lane closes.
    """

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._unlabelled: list[Trace] = []

    def __call__(self, trace: Trace) -> None:
        if not language_ready():
            self._put(trace)
            self._unlabelled.append(trace)
            return
        self._label_unlabelled()
        trace.languages = _languages(trace)
        self._put(trace)

    def close(self) -> None:
        """Store the languages still missing, waiting for the language model if need be."""
        self._label_unlabelled()

    def _label_unlabelled(self) -> None:
        for trace in self._unlabelled:
            trace.languages = _languages(trace)
            self._put(trace)
        self._unlabelled.clear()

    def _put(self, trace: Trace) -> None:
        if self.ws.cache and trace.turn.error is None:
            _put_turn(self.ws, trace)


def render_shard(ws: Workspace, traces: list[Trace]) -> list[Trace]:
    """Render every answer into the reader's panel."""
    for trace in traces:
        if trace.turn is None or trace.prompt is None:
            continue
        began = time.time()
        trace.panel = panel(ws, trace.turn.answer, trace.prompt.sources,
                            refused=trace.turn.refused or trace.turn.error is not None, cited=trace.turn.cited,
                            outside=set(trace.outside_docs), elsewhere=trace.links)
        trace.timeline["render"] = (began, time.time())
    return traces


class _StoredHit(TypedDict):
    section_id: str
    chunk_id: str
    score: float


class _StoredRanking(TypedDict):
    hits: list[_StoredHit]
    ms: float
    deeper: NotRequired[list[str]]  # absent, with ``depth``, in rankings stored before they were kept
    depth: NotRequired[int | None]


class _StoredTurn(TypedDict):
    reply: Reply
    languages: dict[str, str | None]


_RANKING = TypeAdapter(_StoredRanking)
_TURN = TypeAdapter(_StoredTurn)


def _ranking_reader(ws: Workspace) -> Callable[[dict], _StoredRanking]:
    """How a stored ranking is read back: of the shape ``store_rankings`` writes, naming chunks of this corpus."""

    def read(entry: dict) -> _StoredRanking:
        ranking = _RANKING.validate_python(entry)
        for hit in ranking["hits"]:
            chunk = ws.chunks.get(hit["chunk_id"])
            if chunk is None or chunk.section_id != hit["section_id"]:
                raise ValueError(f"hit {hit['chunk_id']!r} is no chunk of this corpus")
        return ranking

    return read


def lookup_rankings(ws: Workspace, traces: list[Trace], *, refresh: bool = False) -> list[int]:
    """Fill in every trace whose ranking is cached; return the positions of those still to rank.

    ``refresh`` fills in nothing, so every trace is ranked afresh.
    """
    todo = []
    depth = max(ws.config.retrieval.top_k, GOLD_DEPTH)
    read = _ranking_reader(ws)
    for position, trace in enumerate(traces):
        began = time.time()
        hit = ws.cache.get(_ranking_key(ws, trace.record, trace.query), read) if ws.cache and not refresh else None
        # An entry ranked to another depth (or before rankings kept one) cannot tell this run's gold rank.
        if hit is None or hit.get("depth") != depth or "deeper" not in hit:
            todo.append(position)
            continue
        trace.hits, trace.retrieve_ms = hit["hits"], hit["ms"]
        trace.deeper, trace.depth = hit["deeper"], depth
        trace.cached.append("retrieve")
        trace.timeline["retrieve"] = (began, time.time())  # the look-up: this run's time, not the stored one
    return todo


def store_rankings(ws: Workspace, traces: list[Trace]) -> None:
    """Store rankings computed here or on other processes, under the keys ``lookup_rankings`` reads."""
    if ws.cache is None:
        return
    ws.cache.set_many([
        (_ranking_key(ws, trace.record, trace.query),
         {"hits": trace.hits, "ms": trace.retrieve_ms, "deeper": trace.deeper, "depth": trace.depth})
        for trace in traces
        if trace.retrieve_ms is not None and "retrieve" not in trace.cached
    ])


def lookup_turns(ws: Workspace, traces: list[Trace], *, refresh: bool = False) -> list[int]:
    """Fill in the cached turn of every primed trace; return the positions of those still to answer.

    Traces the retrieval gate refused, with no prompt, or already answered need no model
    and are never returned. ``refresh`` fills in nothing, so every primed trace is answered afresh.

    The cache holds each reply as it was received; what it means (an answer, a refusal,
    truncated) is read from it here by today's rules (``read_reply``), as a live turn is.
    A stored reply those rules call an error is asked again, as an errored turn would be.
    """
    todo = []
    for position, trace in enumerate(traces):
        if trace.gate_refused or trace.prompt is None or trace.turn is not None:
            continue
        began = time.time()
        stored = ws.cache.get(turn_key(ws, trace), _TURN.validate_python) if ws.cache and not refresh else None
        if stored is None:
            todo.append(position)
            continue
        turn = read_reply(stored["reply"])
        if turn.error is not None:
            todo.append(position)
            continue
        trace.turn = turn
        trace.languages = stored["languages"]
        trace.cached.append("model")
        trace.timeline["model"] = (began, time.time())
    return todo


def _put_turn(ws: Workspace, trace: Trace) -> None:
    # The entry ``lookup_turns`` reads back: the reply as received, never what it was read to mean.
    reply = trace.turn.model_dump(include=REPLY_FIELDS)
    ws.cache.set(turn_key(ws, trace), {"reply": reply, "languages": trace.languages})


def _ranking_key(ws: Workspace, record: GoldenRecord, query: str | None = None) -> str:
    # The key of a ranking: the retriever, what was searched (the question, or a follow-up's query), its scope.
    top_k = ws.config.retrieval.top_k
    return cache_key("retrieve", ws.retriever.fingerprint, query or record.question, record.scope, top_k)
