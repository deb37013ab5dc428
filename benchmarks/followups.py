"""Follow-ups' retrieval, asked as written and as ``retrieval_query`` rewrites them, per conversation set and split.

For every golden conversation of a set, each positive turn is ranked by the default
retriever (the demo config's settings), as ``docpilot eval --gate-only`` ranks a
question: first turns with their question (the rewrite leaves a first turn as it is),
follow-ups twice, with the question as the user wrote it ("plain") and with the
question ``docpilot.assistant.followup.retrieval_query`` makes of it and the turns
before ("rewritten"). An earlier turn's answer is its ``answer_given``, else None (no
model runs here; the rewrite reads no answer anyway).

Four sets: the demo conversations over DocPilot's own manual (those of ``evals/golden.yaml``),
and conversations over the FastAPI, Prefect and httpx docs (``benchmarks/data/conversations/``),
each written before any rewrite was measured on it; docs/retrieval.md#follow-ups says
which of them chose the rule. Those docs live outside the repository (``--data``, by
default ``../shared/data`` beside it); a set whose docs are missing is reported as
absent and the others still run.

    python -m benchmarks.followups                 # a table, as docs/retrieval.md#follow-ups shows it
    python -m benchmarks.followups --json
    python -m benchmarks.followups --data PATH
    python -m benchmarks.followups --alternatives  # and each other way the rule was chosen against
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docpilot.metrics.retrieval import recall_at_k  # noqa: E402

from docpilot.assistant.followup import retrieval_query  # noqa: E402
from docpilot.assistant.workspace import open_workspace  # noqa: E402
from docpilot.config.loading import load_config  # noqa: E402
from docpilot.corpus.pages import load_corpus  # noqa: E402
from docpilot.golden.loading import load_golden  # noqa: E402
from docpilot.retrieval.rankers import Retriever  # noqa: E402
from docpilot.retrieval.tokens import words  # noqa: E402
from docpilot.schema import GoldenRecord  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
CONFIG = ROOT / "configs" / "docpilot.yaml"
SPLITS = ("dev", "test")
K = 8


@dataclass(frozen=True)
class ConversationSet:
    """A docs corpus and a golden set of conversations written about it (its single questions are not read)."""

    name: str
    docs: Path
    conversations: Path


def sets(data: Path) -> list[ConversationSet]:
    """The demo conversations over the project's manual, and the FastAPI, Prefect and httpx ones over docs written
    elsewhere."""
    return [
        ConversationSet("demo", ROOT / "docs", ROOT / "evals" / "golden.yaml"),
        ConversationSet(
            "fastapi",
            data / "fastapi-docs" / "docs" / "en" / "docs",
            ROOT / "benchmarks" / "data" / "conversations" / "fastapi.yaml",
        ),
        ConversationSet(
            "prefect",
            data / "prefect-docs" / "docs",
            ROOT / "benchmarks" / "data" / "conversations" / "prefect.yaml",
        ),
        ConversationSet("httpx", data / "httpx-docs" / "docs", ROOT / "benchmarks" / "data" / "conversations" / "httpx.yaml"),
    ]


def load_turns(path: Path) -> list[GoldenRecord]:
    """Every turn of the conversations in a golden set, one record each; its single questions are left out."""
    return [record for record in load_golden(path) if record.conversation is not None]


def earlier_of(record: GoldenRecord) -> list[tuple[str, str | None]]:
    """A turn's earlier turns as ``retrieval_query`` reads them: (question, answer given) pairs, first first."""
    return [(turn.question, turn.answer_given) for turn in record.earlier]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def _words_of(texts: list[str]) -> str:
    return " ".join(word for text in texts for word in words(text))


ALTERNATIVES: dict[str, Callable[[str, list[tuple[str, str | None]]], str]] = {
    "previous question, new words": lambda q, e: retrieval_query(q, e[-1:]),
    "previous question, repeats kept": lambda q, e: f"{q} {_words_of([e[-1][0]])}",
    "first question, repeats kept": lambda q, e: f"{q} {_words_of([e[0][0]])}",
    "every earlier question, new words": lambda q, e: retrieval_query(q, [(" ".join(p for p, _ in e), None)]),
    "every earlier question, repeats kept": lambda q, e: f"{q} {_words_of([p for p, _ in e])}",
    "previous question when referential": lambda q, e: f"{q} {_words_of([e[-1][0]])}" if _referential(q) else q,
    "follow-up twice, previous question": lambda q, e: f"{q} {q} {_words_of([e[-1][0]])}",
    "previous question and answer": lambda q, e: f"{q} {_words_of([e[-1][0], e[-1][1] or ''])}",
}
"""The other ways of searching a follow-up that the rule was chosen against (``--alternatives``), each given a
follow-up and its earlier (question, answer) turns: the follow-up followed by the content words of the turns named,
either only those it lacks ("new words", as the rule adds the first question's) or every one ("repeats kept")."""

_POINTING = frozenset("it its that this these those them they one ones other same there then too also another".split())


def _referential(question: str) -> bool:
    """A follow-up that looks as if it leans on an earlier turn: a pointing word, or at most three content words."""
    return bool(_POINTING.intersection(re.findall(r"[a-z']+", question.lower()))) or len(words(question)) <= 3


def split_figures(records: list[GoldenRecord], rank: Callable[[str, list[str] | None], list[str]], *,
                  alternatives: bool = False) -> dict:
    """recall@8 of a split's positive turns: first turns, and follow-ups plain and rewritten (and searched each
    other way of ``ALTERNATIVES``, with ``alternatives``)."""
    first, plain, rewritten, changed = [], [], [], 0
    other: dict[str, list[float]] = {name: [] for name in ALTERNATIVES} if alternatives else {}
    for record in records:
        if not record.gold:
            continue
        earlier = earlier_of(record)
        query = retrieval_query(record.question, earlier)
        found = recall_at_k(rank(query, record.scope), record.gold, K)
        if not earlier:
            first.append(found)
            continue
        rewritten.append(found)
        plain.append(recall_at_k(rank(record.question, record.scope), record.gold, K))
        changed += query != record.question
        for name, found_by in other.items():
            found_by.append(recall_at_k(rank(ALTERNATIVES[name](record.question, earlier), record.scope), record.gold, K))
    figures = {
        "first_turns": len(first), "first_recall@8": _mean(first),
        "follow_ups": len(plain), "follow_ups_rewritten": changed,
        "plain_recall@8": _mean(plain), "rewritten_recall@8": _mean(rewritten),
    }
    if alternatives:
        figures["alternatives_recall@8"] = {name: _mean(values) for name, values in other.items()}
    return figures


def _retriever(chosen: ConversationSet) -> Retriever:
    """The default retriever over a set's docs: the demo's as the eval opens it, the same settings elsewhere."""
    config = load_config(CONFIG, overrides={"corpus": {"docs": str(chosen.docs)}})
    if chosen.name == "demo":
        return open_workspace(config, use_cache=False).retriever
    return Retriever(load_corpus(chosen.docs), config.retrieval)


def measure_set(chosen: ConversationSet, *, alternatives: bool = False) -> dict:
    """Each split's figures for one conversation set; ``absent`` when its docs are not on this machine."""
    if not chosen.docs.is_dir():
        return {"set": chosen.name, "absent": str(chosen.docs)}
    retriever = _retriever(chosen)
    turns = load_turns(chosen.conversations)

    def rank(query: str, scope: list[str] | None) -> list[str]:
        return [hit.section_id for hit in retriever.search(query, scope=scope, k=K)]

    return {
        "set": chosen.name,
        "conversations": str(chosen.conversations.relative_to(ROOT)),
        "retriever": retriever.settings.retriever,
        "splits": {split: split_figures([r for r in turns if r.split == split], rank, alternatives=alternatives)
                   for split in SPLITS},
    }


def run(data: Path, *, alternatives: bool = False) -> dict:
    """Every figure of the table, as one JSON-ready object."""
    return {"k": K, "sets": [measure_set(s, alternatives=alternatives) for s in sets(data)]}


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def table(result: dict) -> str:
    """The figures as a Markdown table, the way docs/retrieval.md#follow-ups shows them."""
    lines = [
        "| set | split | first turns | recall@8 | follow-ups | plain recall@8 | rewritten recall@8 |",
        "|---|---|---|---|---|---|---|",
    ]
    for measured in result["sets"]:
        if "absent" in measured:
            lines.append(f"| {measured['set']} | – | absent: {measured['absent']} | | | | |")
            continue
        for split, f in measured["splits"].items():
            lines.append(
                f"| {measured['set']} | {split} | {f['first_turns']} | {_cell(f['first_recall@8'])} "
                f"| {f['follow_ups']} | {_cell(f['plain_recall@8'])} | {_cell(f['rewritten_recall@8'])} |"
            )
    if any("alternatives_recall@8" in f for m in result["sets"] for f in m.get("splits", {}).values()):
        lines += ["", "| follow-ups searched with | " + " | ".join(_columns(result)) + " |",
                  "|---|" + "---|" * len(_columns(result))]
        lines += [f"| {name} | " + " | ".join(_cell(f["alternatives_recall@8"][name]) for f in _splits(result)) + " |"
                  for name in ALTERNATIVES]
    return "\n".join(lines)


def _splits(result: dict) -> list[dict]:
    return [f for m in result["sets"] for f in m.get("splits", {}).values()]


def _columns(result: dict) -> list[str]:
    return [f"{m['set']} {split}" for m in result["sets"] for split in m.get("splits", {})]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding fastapi-docs/, prefect-docs/ and httpx-docs/")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--alternatives", action="store_true",
                        help="also search follow-ups each other way the rule was chosen against")
    args = parser.parse_args(argv)
    result = run(args.data, alternatives=args.alternatives)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
