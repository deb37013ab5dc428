"""Report rows from the traces of a run: what the scorer reads, built once per record.

A row gathers the record, its ranked sections (each once, at its first rank), the
first gold rank past the top 8, the prompt's sources, the turn and its rendered panel.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from docpilot.assistant.language import RULE as LANGUAGE_RULE
from docpilot.assistant.language import detect_language, expected_language
from docpilot.assistant.workspace import Trace
from docpilot.config.model import ModelConfig
from docpilot.metrics.retrieval import first_found
from docpilot.models.prices import turn_cost_usd
from docpilot.schema import Row

if TYPE_CHECKING:
    from docpilot.retrieval.bias import BiasMeter


def build_rows(
    traces: list[Trace], *, gate_only: bool = False, corpus_language: str | None = None,
    model: ModelConfig | None = None, meter: BiasMeter | None = None, gold_states: Mapping[str, str] | None = None,
) -> list[Row]:
    """One report row per trace: what the scorer reads.

    ``corpus_language`` is the docs' language, which a record expects when neither it
    nor its question says which (``docpilot.assistant.language.expected_language``).
    ``model`` gives the prices that turn each row's usage into its ``cost_usd``.
    ``meter`` measures each positive's ``overlap`` with its gold sections (none without it).
    ``gold_states`` names the records whose gold went stale since the set was locked
    (``docpilot.golden.gold_state.gold_states``), each with its row's ``gold_state``.
    """
    rows = []
    for trace in traces:
        began = time.time()
        row = _row(trace, gate_only=gate_only, corpus_language=corpus_language, model=model, meter=meter)
        if gold_states and trace.attack is None and trace.record.id in gold_states:
            row.gold_state = gold_states[trace.record.id]
        row.timeline["score"] = (began, time.time())
        rows.append(row)
    return rows


def _detected(trace: Trace, which: str, text: str | None) -> str | None:
    # Detections stored under the current rule are reused; others are made again.
    if trace.languages.get("rule") == LANGUAGE_RULE and which in trace.languages:
        return trace.languages[which]
    return detect_language(text)


def _distinct_hits(hits: list[dict]) -> tuple[list[str], list[float]]:
    """The ranked section ids with each section once, at its first rank, and their scores beside them.

    A ranked list from a server (or a retriever that folds chunks loosely) may name a
    section twice; a repeat would count twice in context precision but once in recall.
    """
    retrieved: list[str] = []
    scores: list[float] = []
    seen: set[str] = set()
    for hit in hits:
        if hit["section_id"] not in seen:
            seen.add(hit["section_id"])
            retrieved.append(hit["section_id"])
            scores.append(hit["score"])
    return retrieved, scores


def _gold_rank(trace: Trace, retrieved: list[str]) -> tuple[int | None, int | None]:
    """A positive's first gold rank by the metrics' rule, over ``retrieved`` then ``deeper``, and the depth searched.

    A server's ranking holds only its hits, so its depth is theirs; anything but a positive has neither.
    """
    if trace.attack is not None or not trace.record.gold:
        return None, None
    depth = len(retrieved) if trace.depth is None else trace.depth
    return first_found([*retrieved, *trace.deeper], trace.record.gold, k=depth), depth


def _row(trace: Trace, *, gate_only: bool, corpus_language: str | None = None,
         model: ModelConfig | None = None, meter: BiasMeter | None = None) -> Row:
    # The fields are gathered first and the row is built once: cheaper than setting
    # them one by one on a built row, a thousand rows at a time.
    record = trace.record
    retrieved, scores = _distinct_hits(trace.hits)
    gold_rank, gold_depth = _gold_rank(trace, retrieved)
    row = dict(
        id=record.id,
        kind="attack" if trace.attack else record.kind,
        split=record.split,
        question=record.question,
        gold=record.gold,
        scope=record.scope,
        expected_cause=record.expected_cause,
        language=record.language,
        tags=record.tags,
        retrieved=retrieved,
        scores=scores,
        gold_rank=gold_rank,
        gold_depth=gold_depth,
        unranked=trace.unranked,
        outside_docs=trace.outside_docs,
        outside_links=trace.links,
        stages_dropped=trace.stages_dropped,
        gold_answer=record.gold_answer,
        identifiers=record.identifiers,
        cached=trace.cached,
        timeline=trace.timeline,
        sample=trace.sample,
        conversation=record.conversation,
        turn=record.turn,
        retrieval_query=trace.query if trace.query != record.question else None,
    )
    if trace.attack is not None:
        row.update(forbidden=trace.attack.forbidden, expect=trace.attack.expect)
    elif meter is not None and record.gold:
        row["overlap"] = meter.overlap(record)
    if gate_only:
        if trace.retrieve_ms is not None:
            row["stages_ms"] = {"retrieve": round(trace.retrieve_ms, 3)}
        return Row(**row)
    question_language = _detected(trace, "question", record.question)
    row["question_language"] = question_language
    row["language"] = expected_language(record.language, question_language, corpus_language)
    if trace.prompt is not None:
        row["primed"] = [s.section_id for s in trace.prompt.sources]
    stages = {"retrieve": trace.retrieve_ms or 0.0}
    shown = True  # the panel's facts count unless the record was refused or errored
    if trace.gate_refused:
        row.update(refused=True, refused_by="gate", refusal_cause="not-answerable",
                   latency_ms=round(stages["retrieve"], 3))
        shown = False
    elif trace.turn is not None:
        turn = trace.turn
        stages["model"] = turn.latency_ms or 0.0
        offset = stages["retrieve"]
        row.update(
            answer=turn.answer,
            reasoning=turn.reasoning,
            usage=turn.usage,
            cost_usd=turn_cost_usd(turn.usage, model),
            truncated=turn.truncated,
            error=turn.error,
            error_code=turn.error_code,
            refused=turn.refused,
            refused_by="model" if turn.refused else None,
            refusal_cause=turn.refusal_cause,
            latency_ms=round(offset + (turn.latency_ms or 0.0), 3),
            # A refusal notice is not an answer the reader sees painted, so it has no first token.
            first_token_ms=(None if turn.first_token_ms is None or turn.refused
                            else round(offset + turn.first_token_ms, 3)),
            first_thought_ms=None if turn.first_thought_ms is None else round(offset + turn.first_thought_ms, 3),
        )
        shown = not turn.refused and turn.error is None
        if shown and turn.answer is not None:
            # An answer too short to tell is taken to be in the language it should be in.
            row["answer_language"] = _detected(trace, "answer", turn.answer) or row["language"]
    if trace.panel is not None and shown:
        panel = trace.panel
        row.update(markers=panel.markers, citations=panel.citations, hallucinated=panel.hallucinated,
                   sources_shown=[s.section_id for s in panel.sources], links=panel.links)
    if trace.stages_ms is not None:
        stages = trace.stages_ms  # measured by the server, where the time was spent
    row["stages_ms"] = {k: round(v, 3) for k, v in stages.items()}
    return Row(**row)
