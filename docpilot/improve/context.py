"""Follow-ups that lost the conversation: a turn whose gold its search missed, and an earlier turn would have reached.

A follow-up leans on the turns before it ("Where are reports written?", "How do I
clear the stage cache?", then "How do I delete it safely?"): searched without the turn
that named its subject (DocPilot's assistant adds the words of one earlier question, the
conversation's first), it names nothing the docs can be found by. ``needed_turns`` ranks
each such miss again, read with one earlier turn at a time by the assistant's own rule
(``docpilot.assistant.turn.search_query`` given that one turn):

    for a failing follow-up positive f (turn > 1, no gold section in the top 8),
    searched now as the run searched it (its retrieval_query, else its question)
    and still missing, and each earlier turn e of its conversation:
        rank_e = rank of the first gold section in search(search_query(f, [e]))
    f needs the turn e with the smallest rank_e ≤ 8 (the earliest on a tie);
    none within 8: the conversation would not have reached it (``not-retrieved``).

The earlier turns' questions are the report's rows of the same conversation with a
smaller turn. Deterministic: the run's retriever over the docs as they are now, no
model, no answer read (an answer would make the ranking depend on the model's reply).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from docpilot.assistant.turn import search_query
from docpilot.metrics.retrieval import RANK_DEPTH, first_found
from docpilot.retrieval.rankers import Retriever
from docpilot.schema import Row


@dataclass(frozen=True)
class NeededTurn:
    """The earlier turn a follow-up needed: read with it, the follow-up's gold ranks within the top 8."""

    turn: int
    """Its place in the conversation, from 1."""
    question: str
    """Its question."""
    rank: int
    """Where the follow-up's first gold section ranks when the follow-up is searched with it."""


def lost_follow_up(row: Row) -> bool:
    """Whether a row is a follow-up positive whose ranking holds no gold section in the top 8."""
    return (row.kind == "positive" and bool(row.gold) and row.turn is not None and row.turn > 1
            and row.conversation is not None and not row.unranked and first_found(row.retrieved, row.gold) is None)


def earlier_questions(rows: Sequence[Row]) -> dict[str, dict[int, str]]:
    """Conversation id → turn → its question, from the rows of its turns (the first row of a turn that has samples)."""
    found: dict[str, dict[int, str]] = {}
    for row in rows:
        if row.conversation is not None and row.turn is not None:
            found.setdefault(row.conversation, {}).setdefault(row.turn, row.question)
    return found


def needed_turns(rows: Sequence[Row], retriever: Retriever) -> dict[str, NeededTurn]:
    """Record id → the earlier turn each failing follow-up needed, for those one earlier turn brings within the top 8.

    A follow-up that its own search reaches now (the docs changed since the run) is not
    claimed: the earlier turn would not be what it lacked.
    """
    asked = earlier_questions(rows)
    needed: dict[str, NeededTurn] = {}
    for row in rows:
        if row.id in needed or not lost_follow_up(row):
            continue
        if _rank(retriever, row.retrieval_query or row.question, row) is not None:
            continue
        before = asked.get(row.conversation or "", {})
        best: NeededTurn | None = None
        for turn in sorted(t for t in before if t < (row.turn or 0)):
            rank = _rank(retriever, search_query(row.question, [(before[turn], None)]), row)
            if rank is not None and (best is None or rank < best.rank):
                best = NeededTurn(turn=turn, question=before[turn], rank=rank)
        if best is not None:
            needed[row.id] = best
    return needed


def _rank(retriever: Retriever, query: str, row: Row) -> int | None:
    """The rank of the row's first gold section in the top 8 the retriever gives ``query``, within the row's scope."""
    hits = retriever.search(query, scope=row.scope, k=RANK_DEPTH)
    return first_found([hit.section_id for hit in hits], row.gold)
