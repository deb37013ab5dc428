"""A production log of real-shaped turns over the demo docs, with the truth about each turn beside it.

``make_turns`` draws turns from the demo golden set's positives (questions the docs
answer, their gold sections shown as sources) and from off-topic themes the docs do not
cover, and plants the faults a real log holds: citations of sources not shown, answers
shown with sources and no marker, refusals, sources outside the docs, answers in another
language. Each ``PlantedTurn`` carries what was planted (``truth``), so a test computes
the metrics from the plan, independently of the code that reads the log.

Writers put the same turns in three shapes: an app's own JSONL log (``write_app_log``),
a Mintlify-shaped CSV export (``write_mintlify_csv``: the columns of Mintlify's assistant
conversation export, ``id, timestamp, query, response, sources, queryCategory,
resolutionStatus``, sources a JSON list of ``{title, url}``), and a LangSmith-shaped run
export (``write_langsmith_jsonl``: one run a line, written by the ``langsmith`` library's
own ``Run`` model, with ``inputs``, ``outputs``, ``start_time``, ``end_time``,
``first_token_time`` and ``extra.metadata.thread_id``).
"""

from __future__ import annotations

import csv
import json
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from tests.conftest import ROOT

BASE = "https://docpilot.dev/docs/"

THEMES: dict[str, list[str]] = {
    "saml": [
        "How do I set up SAML single sign-on?",
        "Does DocPilot support SAML SSO with Okta?",
        "Configure SAML login for my team",
        "Can I use SAML with Azure AD?",
        "Where is the SAML metadata URL for SSO?",
        "SAML assertion fails after login, what now?",
        "Is SAML available on the free plan?",
        "How to map SAML groups to roles",
    ],
    "helm": [
        "Is there a Helm chart to install DocPilot?",
        "Which values does the Helm chart take?",
        "Helm upgrade failed with a pending release",
        "Can I pin the image tag in the Helm chart?",
        "Helm chart ingress annotations example",
    ],
    "invoice": [
        "Where can I download my invoice?",
        "Can the invoice show our VAT number?",
        "Invoice email goes to the wrong person",
        "How do I get a PDF invoice for last month?",
    ],
}
THEME_ASKS = {"saml": 45, "helm": 25, "invoice": 14}
SINGLETONS = ["What is the weather in Paris tomorrow?", "Write me a poem about penguins"]
GERMAN = ("Die Antwort steht in der Dokumentation: führen Sie den Befehl aus und prüfen Sie "
          "anschließend die Ausgabe im Bericht, wie auf der Seite beschrieben [1].")


@dataclass
class PlantedTurn:
    """One turn of the log and what was planted in it."""

    id: str
    question: str
    answer: str | None
    sources: list[str]
    refused: bool
    latency_ms: float
    first_token_ms: float | None
    conversation: str
    timestamp: datetime
    truth: dict = field(default_factory=dict)
    """kind, theme, hallucinated (count), unlinked, outside (count), uncited, language_mismatch, gold page."""


def _positives() -> list[dict]:
    records = yaml.safe_load((ROOT / "evals" / "golden.yaml").read_text(encoding="utf-8"))
    out = []
    for record in records:
        sections = [g for g in record.get("gold") or [] if "#" in g and not g.endswith("#")]
        if "question" in record and sections:
            out.append({"question": record["question"], "sections": sections,
                        "answer": record.get("gold_answer") or "See the docs."})
    return out


def _url(section: str) -> str:
    page, _, anchor = section.partition("#")
    return f"{BASE}{page}#{anchor}"


def make_turns(n_on_topic: int = 260, seed: int = 7) -> list[PlantedTurn]:
    """The turns of one log: ``n_on_topic`` about the docs (some with faults), then the off-topic asks, shuffled."""
    rng = random.Random(seed)
    positives = _positives()
    plan = (["good"] * 12 + ["hallucinated"] * 2 + ["unlinked"] * 2 + ["refused"] * 1 + ["outside"] * 1
            + ["german"] * 1 + ["listed-bad"] * 1)
    drafts: list[tuple[str, dict]] = [(rng.choice(plan), rng.choice(positives)) for _ in range(n_on_topic)]
    for theme, asks in THEME_ASKS.items():
        drafts += [("offtopic", {"theme": theme, "question": rng.choice(THEMES[theme])}) for _ in range(asks)]
    drafts += [("offtopic", {"theme": f"single-{i}", "question": q}) for i, q in enumerate(SINGLETONS)]
    rng.shuffle(drafts)
    start = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)
    turns = []
    for i, (kind, draft) in enumerate(drafts):
        turn = _turn(kind, draft, rng)
        turn.id = f"t{i:04d}"
        turn.conversation = f"c{i // 3:04d}"
        turn.timestamp = start + timedelta(seconds=97 * i)
        turns.append(turn)
    return turns


def _turn(kind: str, draft: dict, rng: random.Random) -> PlantedTurn:
    latency = round(rng.uniform(400, 4000), 1)
    first = round(latency * rng.uniform(0.1, 0.4), 1)
    truth = {"kind": kind, "theme": draft.get("theme"), "hallucinated": 0, "unlinked": False, "outside": 0,
             "uncited": False, "language_mismatch": False,
             "page": draft["sections"][0].partition("#")[0] if "sections" in draft else None}
    turn = PlantedTurn(id="", question=draft["question"], answer=None, sources=[], refused=False,
                       latency_ms=latency, first_token_ms=first, conversation="", timestamp=datetime.now(UTC),
                       truth=truth)
    if kind == "offtopic":
        if rng.random() < 0.7:
            turn.refused, turn.answer, turn.first_token_ms = True, "REFUSE: not-answerable", None
        else:
            turn.answer = "I could not find this in the documentation, but it may be possible."
            truth["uncited"] = True
        return turn
    sections = draft["sections"][:2]
    turn.sources = [_url(s) for s in sections]
    body = draft["answer"].replace("[", "(").replace("]", ")")
    if kind == "good":
        turn.answer = f"{body} [1]"
    elif kind == "hallucinated":
        turn.answer = f"{body} [1] [{len(sections) + 3}]"
        truth["hallucinated"] = 1
    elif kind == "unlinked":
        turn.answer = body
        truth["unlinked"] = truth["uncited"] = True
    elif kind == "refused":
        turn.refused, turn.answer, turn.first_token_ms = True, "REFUSE: not-answerable", None
    elif kind == "outside":
        turn.sources.append(f"{BASE}blog/launch-week")
        turn.answer = f"{body} [1]"
        truth["outside"] = 1
    elif kind == "german":
        turn.answer = GERMAN
        truth["language_mismatch"] = True
    elif kind == "listed-bad":  # a marker naming a section id that was not shown
        turn.answer = f"{body} [1] [limits#nowhere]"
        truth["hallucinated"] = 1
    return turn


def write_app_log(turns: Iterable[PlantedTurn], path: Path) -> Path:
    """The turns as an app's own JSONL log: `question`, `answer`, `sources[*].url`, `refused`, times in ms."""
    with path.open("w", encoding="utf-8") as out:
        for t in turns:
            out.write(json.dumps({
                "id": t.id, "ts": t.timestamp.isoformat(), "session": t.conversation, "question": t.question,
                "answer": t.answer, "sources": [{"url": u, "title": u.rsplit("/", 1)[-1]} for u in t.sources],
                "refused": t.refused, "latency_ms": t.latency_ms, "ttft_ms": t.first_token_ms,
            }) + "\n")
    return path


APP_MAPPING = {
    "question": "question", "answer": "answer", "sources": "sources", "source_id": "url",
    "refusal": "refused", "latency": "latency_ms", "ttft": "ttft_ms", "timestamp": "ts",
    "conversation": "session", "id": "id", "source_ids": {"base_url": BASE},
}


def write_mintlify_csv(turns: list[PlantedTurn], path: Path) -> Path:
    """The turns as Mintlify's assistant conversation export, one row a turn."""
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "timestamp", "query", "response", "sources", "queryCategory", "resolutionStatus"])
        for t in turns:
            sources = [{"title": u.rsplit("/", 1)[-1], "url": u} for u in t.sources]
            writer.writerow([t.id, t.timestamp.isoformat().replace("+00:00", "Z"), t.question,
                             "" if t.refused else t.answer, json.dumps(sources), "general",
                             "unanswered" if t.refused else "answered"])
    return path


MINTLIFY_MAPPING = {
    "format": "csv", "question": "query", "answer": "response", "sources": "sources", "source_id": "url",
    "refusal": "resolutionStatus == 'unanswered'", "timestamp": "timestamp", "id": "id",
    "source_ids": {"base_url": BASE},
}


def write_langsmith_jsonl(turns: list[PlantedTurn], path: Path) -> Path:
    """The turns as a LangSmith run export: one root chain run a line, as the `langsmith` library's ``Run``
    model serialises it (ISO times, the thread in ``extra.metadata``)."""
    from langsmith.schemas import Run

    with path.open("w", encoding="utf-8") as out:
        for t in turns:
            first = None if t.first_token_ms is None else t.timestamp + timedelta(milliseconds=t.first_token_ms)
            run = Run(
                id=uuid.UUID(int=int(t.id[1:]) + 1), trace_id=uuid.UUID(int=int(t.id[1:]) + 1), name="docs-qa",
                run_type="chain", start_time=t.timestamp, end_time=t.timestamp + timedelta(milliseconds=t.latency_ms),
                first_token_time=first, inputs={"question": t.question},
                outputs={"answer": t.answer, "source_documents": [
                    {"page_content": "...", "metadata": {"source": u}} for u in t.sources]},
                extra={"metadata": {"thread_id": t.conversation}},
            )
            out.write(run.model_dump_json() + "\n")
    return path


LANGSMITH_MAPPING = {
    "question": "inputs.question", "answer": "outputs.answer", "sources": "outputs.source_documents",
    "source_id": "metadata.source", "latency": "[start_time, end_time]",
    "ttft": "[start_time, first_token_time]", "timestamp": "start_time",
    "conversation": "extra.metadata.thread_id", "id": "id", "source_ids": {"base_url": BASE},
}
