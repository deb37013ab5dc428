"""What ``golden check --target`` shows: one sample reply read as a run reads it, and what the run will count.

The sample goes through the run's own ``Endpoint`` and ``SourceResolver``, so a source the
check calls a section of the docs is one the run scores as that section; and from the
sources it returned the check tells the granularity the target names (sections, pages or
both), how many of the golden set's gold entries the run can ever match at it, and
whether answers will count as unlinked. It also says how the target's follow-ups will be
asked: its conversation mode, and for a thread, whether the sample reply named one.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import aiohttp

from docpilot.api.client import RemoteTurn
from docpilot.assistant.render import render_panel
from docpilot.corpus.pages import Corpus
from docpilot.metrics.gold import pins_one_section
from docpilot.models.base import Source
from docpilot.net.connection import routed_session
from docpilot.schema import GoldenRecord
from docpilot.targets.ask import _EXCERPT, Endpoint, _keys, ask_target
from docpilot.targets.sources import SourceResolver

__all__ = ["check_target"]


def check_target(endpoint: Endpoint, records: Sequence[GoldenRecord], corpus: Corpus) -> dict[str, Any]:
    """Ask the first positive's question (else the first record's) and describe the reply as the run reads it."""
    endpoint = endpoint if endpoint.docs is not None else dataclasses.replace(endpoint, docs=SourceResolver(corpus))
    record = next((r for r in records if r.gold), records[0])

    async def one() -> RemoteTurn:
        async with routed_session(endpoint.url, connections=1, timeout=aiohttp.ClientTimeout(total=None)) as session:
            return await ask_target(session, endpoint, record.question, record.scope, record.id)

    turn = asyncio.run(one())
    return {"record": record.id, "question": record.question, "gold": record.gold,
            **_described(turn, endpoint), "granularity": _granularity(turn, records, corpus),
            "markers": _markers(turn, endpoint), "conversation": _conversation(turn, endpoint)}


def _described(turn: RemoteTurn, endpoint: Endpoint) -> dict[str, Any]:
    """Each field matched or not, each source's id and where it lands, the stage times and first token."""
    reply = endpoint.target.reply
    sources = turn.retrieval.primed if turn.retrieval is not None else []
    outside = set(turn.outside_docs)
    first = turn.events[0].data if turn.events else None
    return {
        "url": endpoint.clean(endpoint.url), "status": turn.status, "error": turn.error,
        "reply_has": endpoint.clean(_keys(first)) if first is not None else None,
        "fields": {
            "answer": {"path": reply.answer, "matched": bool(turn.answer), "value": turn.answer[:_EXCERPT]},
            "sources": {"path": reply.sources, "matched": turn.retrieval is not None, "count": len(sources)},
            "refusal": {"path": reply.refusal, "refused": turn.refusal is not None},
        },
        "citations": {"path": reply.citations, "matched": turn.cited is not None, "cited": turn.cited or []},
        "sources": [{"n": s.n, "source": s.url, "section_id": s.section_id, "in_docs": s.section_id not in outside,
                     "names": _level(s.section_id, outside)} for s in sources],
        "latency_ms": turn.latency_ms, "first_token_ms": turn.first_token_ms, "server_timing": turn.server_timing,
        "server_timing_dropped": turn.stages_dropped,
    }


CONVERSATION_MODES = {
    "history": "follow-ups carry their earlier turns in the body ({history})",
    "messages": "follow-ups carry the whole chat in the body ({messages})",
    "thread": "follow-ups are sent back the thread id the last reply named ({thread})",
    "none": "follow-ups reach this target without their earlier turns",
}
"""Each conversation mode (``Target.conversation``) as the check says it."""


def _conversation(turn: RemoteTurn, endpoint: Endpoint) -> dict[str, Any]:
    """How the target's follow-ups are asked, and for a thread, the one the sample reply named."""
    target = endpoint.target
    mode = target.conversation
    return {"mode": mode, "says": CONVERSATION_MODES[mode], "thread_path": target.reply.thread,
            "thread": turn.thread if mode == "thread" else None}


def _level(section_id: str, outside: set[str]) -> str:
    if section_id in outside:
        return "outside the docs"
    return "a section" if "#" in section_id else "a page"


def _granularity(turn: RemoteTurn, records: Sequence[GoldenRecord], corpus: Corpus) -> dict[str, Any]:
    """The level the sample's sources name, and the share of gold entries a run can match at it.

    A target whose sources name pages is read at page level (``metrics.retrieval.as_read``):
    every gold entry whose page is in the docs can be matched, a section pin only through
    its whole page. One that names sections can match every gold entry the docs hold.
    """
    sources = turn.retrieval.primed if turn.retrieval is not None else []
    outside = set(turn.outside_docs)
    inside = [s.section_id for s in sources if s.section_id not in outside]
    pages = sum("#" not in sid for sid in inside)
    level = None if not inside else "page" if pages == len(inside) else "section" if not pages else "mixed"
    entries = [entry for record in records for entry in record.gold]
    if level in ("page", "mixed"):
        reachable = sum(entry.partition("#")[0] in corpus.pages or corpus.has_entry(entry) for entry in entries)
    else:
        reachable = sum(corpus.has_entry(entry) for entry in entries)
    return {"level": level, "sources_in_docs": len(inside), "sources_naming_pages": pages,
            "sources_outside_docs": len(outside), "gold_entries": len(entries), "reachable": reachable,
            "section_pins": sum(pins_one_section(entry) for entry in entries)}


def _markers(turn: RemoteTurn, endpoint: Endpoint) -> dict[str, Any]:
    """Whether the sample answer links a source, by the renderer the run uses, and what a run counts if not."""
    sources = turn.retrieval.primed if turn.retrieval is not None else []
    shown = [Source(n=s.n, section_id=s.section_id, title=s.title, text="") for s in sources]
    panel = render_panel(turn.answer, shown, lambda section_id: section_id, cited=turn.cited)
    answered = turn.refusal is None and turn.error is None and bool(turn.answer)
    return {"read_from": "reply.citations" if endpoint.target.reply.citations else "the answer's [n] markers",
            "markers": len(panel.markers), "links": panel.links,
            "unlinked": answered and bool(panel.sources) and panel.links == 0}
