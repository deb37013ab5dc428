"""Series of stored runs built without running an eval: valid reports, scored from their rows, one file per night.

For the history tests and benchmarks, which need many runs (a thousand nights) or a
slide built to be slow. Each report is a real ``Report``: its rows are what a run of
the extractive model leaves (ranked sections, primed sources, an answer with a
marker, a citation, times), and its summary, gates and verdict are worked out from
them by ``rescore``, so ``docpilot score`` would agree with every number.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from docpilot import __version__
from docpilot.reports.report import rescore, write_report
from docpilot.schema import Report, Row

PAGES = 20
"""Pages of the imagined docs; record i's gold page is page i % PAGES."""

START = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)
"""The first night of a series."""

_WORDS = ("create", "token", "settings", "page", "deploy", "service", "cluster", "rotate", "secret", "daily")
_CONFIG = {
    "corpus": {"docs": "docs", "base_url": "https://docs.example.com/", "chunk_words": 220},
    "retrieval": {"top_k": 8},
    "prime": {"top_k": 5, "prompt_version": "1"},
    "model": {"provider": "extractive", "name": "extractive-v1"},
    "gates": {"recall@8": ">= 0.5"},
    "reports_dir": "reports",
}


def gold_answer(i: int) -> str:
    """Record i's ten-word gold answer."""
    return " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(10))


def night_report(night: int, *, records: int = 100, seed: int = 0, lost_words: dict[int, int] | None = None,
                 misses: frozenset[int] = frozenset(), top_k: int = 5, pages_changed: tuple[int, ...] = (),
                 model: str = "extractive-v1", golden: str = "g" * 64) -> Report:
    """The report of night ``night`` of a series: 80 % positives, the rest negatives the gate refused.

    ``lost_words`` maps a record to how many words its answer lacks (a slide in
    answer F1); a record in ``misses`` has no gold section in its top 8.
    ``top_k``, ``pages_changed`` and ``model`` change the config, the page
    fingerprints and the model as a change on that night would.
    """
    rng = random.Random(seed * 1_000_003 + night)
    lost_words = lost_words or {}
    rows = []
    for i in range(records):
        page = f"guide/page{i % PAGES}"
        others = [f"guide/page{(i + k) % PAGES}#s{k}" for k in range(1, 9)]
        latency = round(rng.uniform(20, 60), 3)
        if i % 5 == 4:
            rows.append(Row(id=f"r{i:04d}", kind="negative", split="dev", question=f"What about topic {i}?",
                            expected_cause="not-answerable", retrieved=others, scores=[1.0 - k / 10 for k in range(8)],
                            refused=True, refused_by="gate", refusal_cause="not-answerable", latency_ms=latency,
                            stages_ms={"retrieve": latency}))
            continue
        ranked = others if i in misses else [f"{page}#intro", *others[:7]]
        words = gold_answer(i).split()
        answer = " ".join(words[: len(words) - lost_words.get(i, 0)]) + " [1]."
        rows.append(Row(
            id=f"r{i:04d}", kind="positive", split="dev", question=f"How do I {words[0]} the {words[1]} {i}?",
            gold=[page], language="en", retrieved=ranked, scores=[9.0 - k for k in range(8)], primed=ranked[:top_k],
            answer=answer, answer_language="en", gold_answer=gold_answer(i), markers=["1"], citations=[ranked[0]],
            sources_shown=[ranked[0]], links=1, latency_ms=latency, first_token_ms=round(latency / 3, 3),
            stages_ms={"retrieve": 2.0, "model": round(latency - 2.0, 3)},
        ))
    config = {**_CONFIG, "prime": {**_CONFIG["prime"], "top_k": top_k},
              "model": {**_CONFIG["model"], "name": model}}
    when = START + timedelta(days=night)
    pages = {f"guide/page{p}": f"{p:02d}{'x' if p in pages_changed else '0'}".ljust(64, "0") for p in range(PAGES)}
    report = Report(
        run_id=f"{when:%Y%m%dT%H%M%SZ}-{night:06x}", created_at=when.isoformat(timespec="seconds"), config=config,
        fingerprints={"corpus": "c" * 63 + ("1" if pages_changed else "0"), "golden": golden,
                      "model": model.ljust(64, "m"), "config": f"config-top{top_k}-{model}".ljust(64, "f"),
                      "code": "d" * 64},
        page_fingerprints=pages, side_file_fingerprints={"vocabulary.json": None, "llms.txt": None},
        rows=rows, summary={}, gates=[], verdict="pass", wall_ms=1000.0, docpilot_version=__version__,
    )
    return rescore(report)


def write_night(folder: Path, report: Report) -> Path:
    """Store a report in ``folder`` as ``docpilot eval`` would: ``<run_id>.json``."""
    return write_report(report, folder / f"{report.run_id}.json")


def write_series(folder: Path, nights: int, *, records: int = 100, seed: int = 0) -> list[Path]:
    """``nights`` ordinary nights: the same system, a record or two flipping by chance now and then."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for night in range(nights):
        rng = random.Random(seed * 7919 + night)
        misses = frozenset(rng.sample(range(records), k=min(2, records)))
        paths.append(write_night(folder, night_report(night, records=records, seed=seed, misses=misses)))
    return paths


def write_slide(folder: Path, nights: int, *, records: int = 50, per_night: int = 4) -> list[Path]:
    """A slow slide: each night ``per_night`` more answers lose a word, too few for any one night's move."""
    folder.mkdir(parents=True, exist_ok=True)
    positives = [i for i in range(records) if i % 5 != 4]
    paths = []
    for night in range(nights):
        lost = {i: 1 for i in positives[: night * per_night]}
        paths.append(write_night(folder, night_report(night, records=records, lost_words=lost)))
    return paths
