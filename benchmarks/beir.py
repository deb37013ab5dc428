"""Retrieval quality on a BEIR data set (SciFact), measured with DocPilot's own retriever and metrics.

Each BEIR document becomes a one-section page ``d/<doc id>`` (title as the page title,
text as the section), indexed by the project's ``Retriever`` exactly as docs chunks are
(title in the heading path, text as the body; one chunk per document, never split).
Every test query retrieves its top 100 sections, and ``metrics.retrieval`` scores them
with gold entries ``d/<doc id>#``, which match that one document and nothing else.
BEIR's graded relevance is read as binary (relevance > 0), as BEIR's SciFact qrels are.

    python -m benchmarks.beir --data ../shared/data/beir-scifact --retriever bm25 --json

``--split train`` scores the SciFact claims outside the test qrels against the evidence
documents listed in their ``metadata`` (used when ``qrels/train.tsv`` is absent): that
is the split settings are tuned on, so the test figures stay unseen.
``--verify`` recomputes both figures with pytrec_eval on the same ranked lists.
Prints the figures beside the published ones, with index and query timings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docpilot.metrics.retrieval import ndcg_at_k, recall_at_k  # noqa: E402

from docpilot.config.model import RetrievalConfig  # noqa: E402
from docpilot.corpus.pages import Chunk, Corpus, Page, Section  # noqa: E402
from docpilot.retrieval.rankers import Retriever  # noqa: E402

PUBLISHED = {
    "bm25-anserini-flat": {"ndcg@10": 0.6789, "recall@100": 0.9253},
    "bm25-anserini-multifield": {"ndcg@10": 0.6647, "recall@100": 0.9076},
    "all-MiniLM-L6-v2": {"ndcg@10": 0.6451, "recall@100": 0.925},
}
"""SciFact test figures published for the same qrels (see the data folder's README)."""

RETRIEVERS = {
    "bm25": {"retriever": "bm25"},
    "minilm": {"retriever": "dense", "embedder": "minilm"},
    "hybrid-rrf": {"retriever": "hybrid", "embedder": "minilm", "fusion": "rrf"},
    "hybrid-scores": {"retriever": "hybrid", "embedder": "minilm", "fusion": "scores"},
    "static": {"retriever": "dense", "embedder": "static"},
    "static-rrf": {"retriever": "hybrid", "embedder": "static", "fusion": "rrf"},
    "static-scores": {"retriever": "hybrid", "embedder": "static", "fusion": "scores"},
}
"""Benchmark names → the retrieval settings they stand for."""

DEPTH = 100


def page_id(doc_id: str) -> str:
    """The page id a BEIR document gets; its one section is ``page_id + '#'``."""
    return f"d/{doc_id}"


def load_beir_corpus(data: Path) -> Corpus:
    """A BEIR ``corpus.jsonl`` as a DocPilot corpus: one page, one section, one chunk per document."""
    path = data / "corpus.jsonl"
    raw = path.read_bytes()
    pages: dict[str, Page] = {}
    sections: dict[str, Section] = {}
    chunks: list[Chunk] = []
    for line in raw.decode("utf-8").splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        pid = page_id(str(doc["_id"]))
        title = (doc.get("title") or "").strip()
        heading = (title,) if title else ()
        section = Section(
            id=f"{pid}#", page_id=pid, anchor="", title="", heading_path=heading, level=0, text=doc.get("text") or ""
        )
        pages[pid] = Page(
            id=pid, path=f"{pid}.md", title=title, description=None, keywords=(), sections=(section,)
        )
        sections[section.id] = section
        chunks.append(Chunk(f"{section.id}@0", section.id, pid, title, heading, section.text))
    return Corpus(
        root=data.resolve(),
        pages=pages,
        sections=sections,
        chunks=tuple(chunks),
        vocabulary={},
        fingerprint=hashlib.sha256(b"beir-corpus-1:" + raw).hexdigest(),
    )


def load_queries(data: Path) -> dict[str, dict]:
    """Query id → the query's JSON object from ``queries.jsonl``."""
    found = {}
    for line in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            query = json.loads(line)
            found[str(query["_id"])] = query
    return found


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """A BEIR qrels TSV (header line, CRLF or LF) as query id → doc id → relevance."""
    qrels: dict[str, dict[str, int]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        if line.strip():
            query, doc, relevance = line.strip().split("\t")
            qrels.setdefault(query, {})[doc] = int(relevance)
    return qrels


def load_qrels(data: Path, split: str, queries: dict[str, dict]) -> dict[str, dict[str, int]]:
    """The split's qrels; SciFact's train split comes from the claims' evidence when no file has it."""
    path = data / "qrels" / f"{split}.tsv"
    if path.is_file():
        return read_qrels(path)
    if split != "train":
        raise SystemExit(f"error: {path} does not exist; fix: pick a split that has a qrels file")
    held_out = set()
    for other in (data / "qrels").glob("*.tsv"):
        held_out |= set(read_qrels(other))
    return {
        qid: {doc: 1 for doc in query["metadata"]}
        for qid, query in queries.items()
        if qid not in held_out and isinstance(query.get("metadata"), dict) and query["metadata"]
    }


def gold_entries(judged: dict[str, int]) -> list[str]:
    """Exact gold entries for the relevant documents of one query (relevance > 0)."""
    return [page_id(doc) + "#" for doc, relevance in judged.items() if relevance > 0]


def run_queries(retriever: Retriever, questions: dict[str, str]) -> tuple[dict[str, list[str]], float]:
    """Each query's ranked section ids (top 100) and the seconds all queries took."""
    start = time.perf_counter()
    ranked = {qid: [h.section_id for h in retriever.search(text, k=DEPTH)] for qid, text in questions.items()}
    return ranked, time.perf_counter() - start


def score(ranked: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and recall@100 over the judged queries, with the project's metrics."""
    ndcg, recall = [], []
    for qid, judged in qrels.items():
        gold = gold_entries(judged)
        if not gold:
            continue
        got = ranked.get(qid, [])
        ndcg.append(ndcg_at_k(got, gold, 10))
        recall.append(recall_at_k(got, gold, DEPTH))
    return {"ndcg@10": sum(ndcg) / len(ndcg), "recall@100": sum(recall) / len(recall)}


def score_with_pytrec(ranked: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """The same two figures computed by pytrec_eval (trec_eval), for a differential check."""
    import pytrec_eval

    binary = {q: {d: int(r > 0) for d, r in judged.items()} for q, judged in qrels.items()}
    run = {
        qid: {section.removeprefix("d/").removesuffix("#"): 1.0 / rank for rank, section in enumerate(got, 1)}
        for qid, got in ranked.items()
        if qid in binary
    }
    evaluator = pytrec_eval.RelevanceEvaluator(binary, {"ndcg_cut.10", "recall.100"})
    results = evaluator.evaluate(run)
    # trec_eval skips queries with no ranked list; they score 0, as in the project's metrics.
    n = len(binary)
    return {
        "ndcg@10": sum(r["ndcg_cut_10"] for r in results.values()) / n,
        "recall@100": sum(r["recall_100"] for r in results.values()) / n,
    }


def measure(
    data: Path, retriever_name: str, split: str, *, overrides: dict | None = None, index_dir: Path | None = None,
    rebuild: bool = False, verify: bool = False,
) -> dict:
    """Index the corpus, run the split's queries and return the figures and timings."""
    started = time.perf_counter()
    corpus = load_beir_corpus(data)
    load_s = time.perf_counter() - started
    settings = RetrievalConfig(**(RETRIEVERS[retriever_name] | (overrides or {})))
    started = time.perf_counter()
    if index_dir is None:
        retriever = Retriever(corpus, settings)
    else:
        retriever = Retriever.open(corpus, settings.model_copy(update={"index_dir": str(index_dir)}), rebuild=rebuild)
    open_s = time.perf_counter() - started
    queries = load_queries(data)
    qrels = load_qrels(data, split, queries)
    questions = {qid: queries[qid]["text"] for qid in qrels if qid in queries}
    retriever.search(next(iter(questions.values())), k=DEPTH)  # loads a lazy embedder outside the timing
    ranked, query_s = run_queries(retriever, questions)
    figures = score(ranked, qrels)
    index = retriever.index
    result = {
        "dataset": data.name,
        "split": split,
        "queries": len(questions),
        "documents": len(corpus.chunks),
        "retriever": retriever_name,
        "settings": {k: v for k, v in settings.model_dump().items() if v is not None},
        "ndcg@10": round(figures["ndcg@10"], 4),
        "recall@100": round(figures["recall@100"], 4),
        "published": PUBLISHED,
        "timings": {
            "corpus_load_s": round(load_s, 3),
            "index": "built" if index.built else "reused",
            "index_build_s": index.manifest.get("build_seconds"),
            "index_open_s": round(open_s, 3),
            "query_s": round(query_s, 3),
            "queries_per_s": round(len(questions) / query_s, 1),
            "ms_per_query": round(query_s / len(questions) * 1000, 3),
        },
    }
    if verify:
        reference = score_with_pytrec(ranked, qrels)
        result["pytrec_eval"] = {k: round(v, 4) for k, v in reference.items()}
        result["max_abs_difference"] = max(abs(reference[k] - figures[k]) for k in figures)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/")
    parser.add_argument("--retriever", choices=sorted(RETRIEVERS), default="bm25")
    parser.add_argument("--split", default="test", help="qrels split (test; train derives SciFact's from metadata)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a retrieval setting, e.g. --set k1=0.9 (repeatable)")
    parser.add_argument("--index-dir", type=Path, help="save and reuse the index here (default: build in memory)")
    parser.add_argument("--rebuild", action="store_true", help="with --index-dir, build afresh")
    parser.add_argument("--verify", action="store_true", help="also compute the figures with pytrec_eval")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    overrides = parse_settings(args.sets)
    result = measure(
        args.data, args.retriever, args.split, overrides=overrides, index_dir=args.index_dir,
        rebuild=args.rebuild, verify=args.verify,
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return
    t = result["timings"]
    print(f"{result['dataset']} {result['split']} ({result['queries']} queries, {result['documents']} documents), "
          f"retriever {result['retriever']}")
    print(f"  nDCG@10 {result['ndcg@10']:.4f}   recall@100 {result['recall@100']:.4f}")
    for name, figures in PUBLISHED.items():
        print(f"  published {name}: nDCG@10 {figures['ndcg@10']:.4f}   recall@100 {figures['recall@100']:.4f}")
    print(f"  index {t['index']} ({t['index_build_s']} s to build), {t['queries_per_s']} queries/s")


def parse_settings(items: list[str]) -> dict:
    """``--set KEY=VALUE`` items as retrieval overrides: a value is JSON where it parses, else text."""
    overrides = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value
    return overrides


if __name__ == "__main__":
    main()
