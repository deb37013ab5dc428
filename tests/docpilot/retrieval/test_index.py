"""The saved index: reused while nothing changed, rebuilt when a page or a setting did."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.retrieval.index import (
    MANIFEST,
    dense_text,
    index_fingerprint,
    indexed_body,
    lexical_text,
)
from docpilot.retrieval.rankers import Retriever
from tests.conftest import DATA
from tests.docpilot.retrieval.test_embedders import WordHashEmbedder

HARBOR = DATA / "retrieval" / "docs"
QUESTION = "ship rate per metre of length"


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(HARBOR, folder)
    return folder


def _open(docs, cache, *, embedder=None, chunk_words=220, **settings):
    corpus = load_corpus(docs, chunk_words=chunk_words)
    return Retriever.open(corpus, RetrievalConfig(**settings), cache_dir=cache, embedder=embedder)


def _folders(cache):
    root = cache / "index"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_a_second_open_loads_the_saved_index(docs, tmp_path):
    cache = tmp_path / "cache"
    first = _open(docs, cache)
    assert first.index.built and first.index.path.parent == cache / "index"
    manifest = first.index.path / MANIFEST
    written = manifest.stat().st_mtime_ns
    second = _open(docs, cache)
    assert not second.index.built
    assert manifest.stat().st_mtime_ns == written
    assert second.fingerprint == first.fingerprint
    assert second.search(QUESTION) == first.search(QUESTION) == Retriever(load_corpus(docs)).search(QUESTION)
    assert json.loads(manifest.read_text())["chunks"] == len(first.chunks)


def test_editing_a_page_rebuilds_and_drops_the_stale_index(docs, tmp_path):
    cache = tmp_path / "cache"
    before = _open(docs, cache)
    page = docs / "reference" / "fees.md"
    page.write_text(page.read_text() + "\n## Pilotage\n\nA pilot boards every tanker at the outer buoy.\n")
    after = _open(docs, cache)
    assert after.index.built and after.index.fingerprint != before.index.fingerprint
    assert after.search("tanker pilot buoy")[0].section_id == "reference/fees#pilotage"
    # Same docs folder, same settings: the older index can never be read again.
    assert _folders(cache) == [after.index.path.name]


def test_a_setting_change_rebuilds_and_keeps_the_other_index(docs, tmp_path):
    cache = tmp_path / "cache"
    default = _open(docs, cache)
    tuned = _open(docs, cache, k1=0.9)
    assert tuned.index.built and tuned.index.fingerprint != default.index.fingerprint
    assert len(_folders(cache)) == 2
    assert not _open(docs, cache).index.built  # switching back costs nothing
    assert not _open(docs, cache, top_k=3, use_vocabulary=False).index.built  # question-time settings
    assert _open(docs, cache, chunk_words=20).index.built  # the same files, split differently


def test_index_dir_overrides_the_cache_location(docs, tmp_path):
    retriever = _open(docs, tmp_path / "cache", index_dir=str(tmp_path / "elsewhere"))
    assert retriever.index.path.parent == tmp_path / "elsewhere"
    assert _folders(tmp_path / "cache") == []


@pytest.mark.parametrize("damage", ["manifest", "matrix"])
def test_a_damaged_index_is_rebuilt(docs, tmp_path, damage):
    cache = tmp_path / "cache"
    path = _open(docs, cache).index.path
    if damage == "manifest":
        (path / MANIFEST).write_text("{not json")
    else:
        (path / "bm25" / "data.npy").write_bytes(b"broken")
    again = _open(docs, cache)
    assert again.index.built and again.search(QUESTION)
    assert not _open(docs, cache).index.built


def test_dense_index_reuse_and_re_embedding_only_what_changed(docs, tmp_path):
    cache = tmp_path / "cache"
    embedder = WordHashEmbedder()
    first = _open(docs, cache, embedder=embedder, retriever="hybrid")
    chunks = len(first.chunks)
    assert embedder.embedded == chunks and first.index.manifest["embedder"] == embedder.name
    assert (first.index.path / "vectors.npy").is_file()
    _open(docs, cache, embedder=embedder, retriever="hybrid")
    assert embedder.embedded == chunks + 0  # loaded, nothing embedded
    page = docs / "guidebook.md"
    page.write_text(page.read_text().replace("paper copy", "printed copy"))
    edited = _open(docs, cache, embedder=embedder, retriever="hybrid")
    assert edited.index.built
    assert embedder.embedded == chunks + 1  # only the edited chunk
    assert edited.index.manifest["reused_vectors"] == chunks - 1
    # A BM25-only change reuses every vector of the earlier build.
    _open(docs, cache, embedder=embedder, retriever="hybrid", k1=0.9)
    assert embedder.embedded == chunks + 1
    fresh = Retriever(load_corpus(docs), RetrievalConfig(retriever="hybrid"), embedder=WordHashEmbedder())
    assert edited.search(QUESTION) == fresh.search(QUESTION)


def test_the_embedder_is_part_of_the_fingerprint(docs):
    corpus = load_corpus(docs)
    settings = RetrievalConfig(retriever="dense")

    class Other(WordHashEmbedder):
        name = "test/other"

    assert index_fingerprint(corpus, settings, WordHashEmbedder()) != index_fingerprint(corpus, settings, Other())
    # BM25 alone does not depend on any embedder.
    bm25 = RetrievalConfig(retriever="bm25")
    assert index_fingerprint(corpus, bm25, None) == index_fingerprint(corpus, bm25, Other())


@pytest.mark.slow
def test_docpilot_index_builds_then_reuses(docs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    first = runner.invoke(main, ["index", "--docs", str(docs), "--json"])
    assert first.exit_code == 0, first.output
    facts = json.loads(first.stdout)
    assert facts["status"] == "built"
    assert (facts["pages"], facts["sections"], facts["chunks"]) == (5, 13, 13)
    # The default retriever is hybrid with the shipped static vectors.
    assert facts["vocabulary"] > 50 and facts["size_bytes"] > 0 and facts["embedder"].startswith("static/")
    second = json.loads(runner.invoke(main, ["index", "--docs", str(docs), "--json"]).stdout)
    assert second["status"] == "reused" and second["fingerprint"] == facts["fingerprint"]
    shown = runner.invoke(main, ["index", "--docs", str(docs)])
    assert shown.exit_code == 0
    for label in ("pages", "sections", "chunks", "vocabulary", "fingerprint", "path", "size on disk", "build time"):
        assert label in shown.output
    assert "reused" in shown.output


@pytest.mark.slow
def test_docpilot_index_reports_a_missing_docs_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["index", "--docs", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_include_directives_are_left_out_of_the_indexed_text(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "static.md").write_text(
        "# Static files\n\n## Use StaticFiles\n\nMount the folder.\n\n"
        "{* ../../docs_src/static_files/tutorial001_py310.py hl[2,6] *}\n\n"
        '--8<-- "snippets/extra.md"\n\nThen open the page.\n'
    )
    (docs / "ui.md").write_text("# Docs UI\n\nThe docs page lists the snippets of your API.\n")
    corpus = load_corpus(docs)
    section = corpus.sections["static#use-staticfiles"]
    assert "docs_src" in section.text  # the reader still sees where the example goes
    chunk = next(c for c in corpus.chunks if c.section_id == section.id)
    indexed = lexical_text(corpus, chunk, RetrievalConfig())
    assert "Mount the folder." in indexed and "Then open the page." in indexed
    assert "docs_src" not in indexed and "8<" not in indexed and "snippets" not in indexed
    assert "docs_src" not in dense_text(corpus, chunk)
    hits = Retriever(corpus).search("docs src snippets py")
    assert {h.section_id.partition("#")[0] for h in hits} == {"ui"}
    assert indexed_body("a {b} and {*c*} d") == "a {b} and   d"


def test_a_build_that_embeds_reports_its_progress_in_chunks(tmp_path):
    from docpilot import progress

    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(300):
        (folder / f"page-{n:03}.md").write_text(f"# Berth {n}\n\nShips of class {n} moor at pier {n % 7}.\n")
    stream = io.StringIO()
    progress.install(progress.LineSink(stream))
    try:
        built = _open(folder, tmp_path / "cache", embedder=WordHashEmbedder(), retriever="dense")
        reused = _open(folder, tmp_path / "cache", embedder=WordHashEmbedder(), retriever="dense")
    finally:
        progress.install(None)
    # Embedded 256 chunks at a time; a saved index embeds nothing and says nothing.
    assert stream.getvalue().splitlines() == ["embed: 256/300 chunks", "embed: 300/300 chunks"]
    assert built.index.built and not reused.index.built
    whole = WordHashEmbedder().embed([dense_text(built.corpus, c) for c in built.chunks])
    assert np.allclose(built.index.vectors, whole)


QUESTION_RECORD = "- id: q1\n  question: How do I print the guidebook?\n  gold: ['guidebook#printing']\n  split: dev\n"


def _docpilot(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """A docpilot command in its own process, with a config whose retriever embeds (the static model)."""
    config = tmp_path / "docpilot.yaml"
    config.write_text("retrieval:\n  retriever: dense\n  embedder: static\n")
    return subprocess.run(
        [sys.executable, "-m", "docpilot", *args, "--config", str(config)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.mark.slow
def test_docpilot_index_shows_the_embedding_on_stderr_and_keeps_json_on_stdout(docs, tmp_path):
    done = _docpilot(tmp_path, "index", "--docs", str(docs), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["embedder"].startswith("static/")
    assert "embed: 13/13 chunks" in done.stderr.splitlines()


@pytest.mark.slow
def test_docpilot_eval_shows_the_embedding_of_a_missing_index(docs, tmp_path):
    golden = tmp_path / "golden.yaml"
    golden.write_text(QUESTION_RECORD)
    args = ["eval", "--gate-only", "--split", "dev", "--docs", str(docs), "--golden", str(golden),
            "--out", str(tmp_path / "report.json"), "--json"]
    first = _docpilot(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["verdict"] == "pass"
    assert "embed: 13/13 chunks" in first.stderr.splitlines()
    again = _docpilot(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert "embed:" not in again.stderr  # the saved index is loaded, nothing is embedded


@pytest.mark.slow
def test_docpilot_calibrate_shows_the_embedding_of_a_missing_index(docs, tmp_path):
    golden = tmp_path / "golden.yaml"
    negative = "- id: n1\n  question: What is the capital of Peru?\n  gold: []\n  split: dev\n"
    golden.write_text(QUESTION_RECORD + negative)
    done = _docpilot(tmp_path, "calibrate", "--docs", str(docs), "--golden", str(golden), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["table"]  # the table went to stdout, the progress to stderr
    assert "embed: 13/13 chunks" in done.stderr.splitlines()


class _Payload:
    """A pickle that, once loaded, would create ``marker``: what a hostile index folder could hold."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _pickled_array(marker) -> np.ndarray:
    array = np.empty(1, dtype=object)
    array[0] = _Payload(marker)
    return array


@pytest.mark.parametrize("part", ["vectors.npy", "text_hashes.npy", "bm25/data.npy", "bm25/indptr.npy"])
def test_a_pickled_array_in_an_index_folder_is_rebuilt_over_and_never_loaded(docs, tmp_path, part):
    """An index folder restored from elsewhere holds object arrays: the index is built again, and no pickle runs."""
    cache, marker = tmp_path / "cache", tmp_path / "marker"
    embedder = WordHashEmbedder()
    path = _open(docs, cache, embedder=embedder, retriever="hybrid").index.path
    np.save(path / part, _pickled_array(marker), allow_pickle=True)
    again = _open(docs, cache, embedder=embedder, retriever="hybrid")
    # text_hashes.npy is read only as a donor of vectors: the saved index itself still loads.
    assert again.index.built == (part != "text_hashes.npy")
    assert again.search(QUESTION) and not marker.exists()
    rebuilt = _open(docs, cache, embedder=WordHashEmbedder(), retriever="hybrid", k1=0.9)  # reads the donors
    assert rebuilt.index.built and not marker.exists()
    assert np.load(again.index.path / "vectors.npy", allow_pickle=False).dtype == np.float32


# Regression: arrays of another layout loaded as an index, and a search over them raised
# IndexError (BM25 chunks past the index) or ValueError (flat vectors); a vocabulary that
# was a list raised TypeError on opening. float64 vectors were searched as they were.
@pytest.mark.parametrize("part", ["vectors-flat", "vectors-float64", "bm25-indices-out-of-range",
                                  "bm25-vocabulary-list"])
def test_an_index_folder_of_arrays_a_build_never_writes_is_rebuilt(docs, tmp_path, part):
    cache = tmp_path / "cache"
    embedder = WordHashEmbedder()
    path = _open(docs, cache, embedder=embedder, retriever="hybrid").index.path
    vectors = np.load(path / "vectors.npy")
    if part == "vectors-flat":
        np.save(path / "vectors.npy", vectors[:, 0].copy())
    elif part == "vectors-float64":
        np.save(path / "vectors.npy", vectors.astype(np.float64))
    elif part == "bm25-indices-out-of-range":
        indices = np.load(path / "bm25" / "indices.npy")
        np.save(path / "bm25" / "indices.npy", indices + 10_000)
    else:
        (path / "bm25" / "vocabulary.json").write_text(json.dumps(["ship", "rate"]))
    again = _open(docs, cache, embedder=embedder, retriever="hybrid")
    assert again.index.built
    fresh = Retriever(load_corpus(docs), RetrievalConfig(retriever="hybrid"), embedder=WordHashEmbedder())
    assert again.search(QUESTION) == fresh.search(QUESTION)


# Regression: a manifest holding a JSON list raised AttributeError while older indexes were pruned.
def test_a_manifest_that_is_not_an_object_is_rebuilt_over(docs, tmp_path):
    cache = tmp_path / "cache"
    path = _open(docs, cache).index.path
    (path / MANIFEST).write_text(json.dumps(["format", "fingerprint"]))
    again = _open(docs, cache, k1=0.9)  # lists the saved indexes to prune them: the list is skipped
    assert again.index.built and _open(docs, cache).index.built
