"""How fast retrieval is on a real docs folder: index build, size, load, and 1,000 questions.

Questions are generated from the docs themselves, deterministically (seeded): half
from section headings ("How do I <heading>?"), half from a run of words taken out of a
section's sentences. Each question knows the section it came from, so the run also
reports how often that section is in the top 8 (a sanity figure, not a quality
benchmark: such questions share words with their section by construction).

    python -m benchmarks.retrieval_speed --docs ../shared/data/prefect-docs/docs --json

Timings: index build (a fresh build, nothing reused), index load (a second open that
finds the saved index), and the questions run one after another after one untimed
warm-up question, as a server answering them would. Wall time and this process's CPU
time are both given: on a busy machine the first includes waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docpilot.metrics.retrieval import recall_at_k  # noqa: E402

from docpilot.config.model import RetrievalConfig  # noqa: E402
from docpilot.corpus.pages import Corpus, load_corpus  # noqa: E402
from docpilot.retrieval.index import folder_size  # noqa: E402
from docpilot.retrieval.rankers import Retriever  # noqa: E402

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]+")
_OPENERS = ("How do I", "What is", "Where can I find", "How does", "Explain")


def make_questions(corpus: Corpus, count: int, *, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` (question, source section id) pairs drawn from the corpus's headings and sentences."""
    rng = random.Random(seed)
    titled = [s for s in corpus.sections.values() if s.title]
    worded = [(s, w) for s in corpus.sections.values() if len(w := _WORD.findall(s.text)) >= 8]
    questions = []
    for n in range(count):
        if n % 2 == 0 and titled:
            section = rng.choice(titled)
            questions.append((f"{rng.choice(_OPENERS)} {section.title.lower()}?", section.id))
        else:
            section, words = rng.choice(worded)
            size = rng.randint(5, min(9, len(words)))
            start = rng.randrange(0, len(words) - size + 1)
            questions.append((f"{rng.choice(_OPENERS)} {' '.join(words[start:start + size])}?", section.id))
    return questions


def measure(docs: Path, *, count: int, settings: RetrievalConfig, index_dir: Path) -> dict:
    """Build, save, load and query an index over ``docs``; every figure the module docstring lists."""
    started = time.perf_counter()
    corpus = load_corpus(docs)
    corpus_s = time.perf_counter() - started
    settings = settings.model_copy(update={"index_dir": str(index_dir)})

    started = time.perf_counter()
    built = Retriever.open(corpus, settings, rebuild=True)
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    retriever = Retriever.open(corpus, settings, embedder=built.embedder)
    load_s = time.perf_counter() - started
    if retriever.index.built:
        raise SystemExit("error: the second open rebuilt the index instead of loading it")

    questions = make_questions(corpus, count)
    retriever.search(questions[0][0])  # warm-up: caches, a lazily loaded embedder
    each_ms = []
    found = []
    started, cpu_started = time.perf_counter(), time.process_time()
    for question, source in questions:
        t = time.perf_counter()
        hits = retriever.search(question)
        each_ms.append((time.perf_counter() - t) * 1000)
        found.append(recall_at_k([h.section_id for h in hits], [source], 8))
    total_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    each_ms.sort()
    return {
        "docs": str(docs),
        "retriever": settings.retriever,
        "pages": len(corpus.pages),
        "sections": len(corpus.sections),
        "chunks": len(corpus.chunks),
        "vocabulary": retriever.index.manifest.get("vocabulary"),
        "questions": len(questions),
        "corpus_load_s": round(corpus_s, 3),
        "index_build_s": round(build_s, 3),
        "index_size_bytes": folder_size(retriever.index.path),
        "index_load_s": round(load_s, 3),
        "questions_total_s": round(total_s, 3),
        "questions_cpu_s": round(cpu_s, 3),
        "ms_per_question": {
            "mean": round(statistics.fmean(each_ms), 3),
            "p50": round(each_ms[len(each_ms) // 2], 3),
            "p95": round(each_ms[int(len(each_ms) * 0.95) - 1], 3),
            "max": round(each_ms[-1], 3),
        },
        "source_section_in_top8": round(statistics.fmean(found), 4),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, required=True, help="docs folder of Markdown/MDX pages")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--retriever", choices=["bm25", "dense", "hybrid"], default="bm25")
    parser.add_argument("--embedder", choices=["minilm", "static", "openai"], default="minilm")
    parser.add_argument("--fusion", choices=["rrf", "scores"], default=None, help="hybrid's fusion (default: the setting's)")
    parser.add_argument("--index-dir", type=Path, help="where to save the index (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    chosen = {"retriever": args.retriever, "embedder": args.embedder}
    settings = RetrievalConfig(**chosen | ({"fusion": args.fusion} if args.fusion else {}))
    with tempfile.TemporaryDirectory(prefix="docpilot-speed-") as scratch:
        result = measure(args.docs, count=args.questions, settings=settings, index_dir=args.index_dir or Path(scratch))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['pages']} pages, {result['sections']} sections, {result['chunks']} chunks ({result['retriever']})")
    print(f"  index: built in {result['index_build_s']} s, {result['index_size_bytes'] / 1e6:.1f} MB, "
          f"loaded in {result['index_load_s']} s")
    print(f"  {result['questions']} questions in {result['questions_total_s']} s "
          f"(p50 {result['ms_per_question']['p50']} ms, p95 {result['ms_per_question']['p95']} ms)")


if __name__ == "__main__":
    main()
