"""One answer turn's steps around the model, written once for `docpilot serve` and the eval.

    question ─► ranked hits ─► primed: the prompt and the gate's verdict ─► model ─► panel

The server takes a question through these steps one at a time, streaming the model's
reply as events (``docpilot.server.turn``); the eval takes a shard of records through
them stage by stage, its model turns sent through the run's model lane and its steps
looked up in the stage cache (``docpilot.run.road``). Both call ``primed`` and
``panel``, so an answer served is primed, gated and rendered as the eval scores it.

A follow-up (a question asked after earlier turns of a conversation) is searched for
with ``search_query``, which reads the question with the turns before it, and primed
with those turns as chat messages (``primed(..., history=...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from docpilot.assistant.guard import gate_refuses
from docpilot.assistant.primer import prime
from docpilot.assistant.render import Panel, render_panel
from docpilot.assistant.workspace import Workspace
from docpilot.corpus.pages import section_url
from docpilot.models.base import Prompt, Source
from docpilot.retrieval.rankers import Hit


@dataclass(frozen=True, slots=True)
class Primed:
    """What the model is given for a question, and whether the retrieval gate refuses before it."""

    prompt: Prompt
    gate_refused: bool


def primed(ws: Workspace, question: str, hits: Sequence[Hit], *,
           history: Sequence[Mapping[str, str]] = ()) -> Primed:
    """The prompt built from the top ``prime.top_k`` hits, and the gate's verdict on the hits.

    ``history``: a follow-up's earlier turns as chat messages (``{"role": "user" |
    "assistant", "content": ...}``, first first; ``primer.history_messages`` builds them
    from (question, answer) pairs), carried before the question within the primer's
    bounds. Empty, the prompt is a single question's, byte for byte.
    """
    prompt = prime(question, hits, ws.chunks, k=ws.config.prime.top_k, history=history)
    return Primed(prompt, gate_refuses(ws.config.guard, hits))


def search_query(question: str, earlier: Sequence[tuple[str, str | None]]) -> str:
    """What the docs are searched with for a question asked after ``earlier`` (question, answer) turns.

    A first question is searched as asked. A follow-up ("and does that need a model?")
    leans on the turns before it, so it is rewritten by ``followup.retrieval_query`` of
    this package, the one rule for the server and the eval alike.
    """
    from docpilot.assistant.followup import retrieval_query  # only a turn of a conversation needs the rule

    return retrieval_query(question, list(earlier))


def url_for(ws: Workspace, outside: Collection[str] = (), elsewhere: Mapping[str, str] | None = None,
            ) -> Callable[[str], str]:
    """A section id's link for readers: under ``corpus.base_url`` when one is set.

    A bare page id (a target that named a page) links to the page. A source the docs do
    not hold (``outside``, a target's) links where the assistant said it lives
    (``elsewhere``: id → its web address), else where its id would be under the base URL.
    Any other id must be a section of the docs: DocPilot's own assistant primes no other.
    """
    base = ws.config.corpus.base_url
    elsewhere = elsewhere or {}

    def link(section_id: str) -> str:
        if section_id in outside:
            return elsewhere.get(section_id) or section_url(section_id, base)
        if "#" not in section_id:
            return section_url(section_id, base)
        return ws.corpus.section_url(section_id, base)

    return link


def panel(ws: Workspace, answer: str, sources: Sequence[Source], *, refused: bool = False,
          cited: Sequence[str] | None = None, outside: Collection[str] = (),
          elsewhere: Mapping[str, str] | None = None) -> Panel:
    """The reader's panel of an answer: the text with its citations (its markers, or ``cited``) linked to the sources."""
    return render_panel(answer, sources, url_for(ws, outside, elsewhere), refused=refused, cited=cited)
