"""The BEIR benchmark script on a six-document corpus, checked against pytrec_eval."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from docpilot.metrics.gold import matches

from benchmarks import beir
from benchmarks.retrieval_speed import make_questions
from docpilot.corpus.pages import load_corpus
from tests.conftest import DATA, ROOT

pytestmark = pytest.mark.slow

TINY = DATA / "benchmarks" / "beir-tiny"


def test_documents_become_one_section_pages_with_exact_gold_entries():
    corpus = beir.load_beir_corpus(TINY)
    assert list(corpus.pages) == ["d/1", "d/10", "d/2", "d/3", "d/4", "d/5"]
    assert [c.section_id for c in corpus.chunks][:2] == ["d/1#", "d/10#"]
    assert corpus.chunks[0].heading_path == ("Vitamin D and bone density",)
    assert corpus.chunks[3].heading_path == ()  # no title, no heading
    # The gold entry of document 1 must not match document 10 (a prefix of its id).
    assert matches("d/1#", "d/1#") and not matches("d/10#", "d/1#")


def test_qrels_read_crlf_with_a_header_and_graded_relevance_as_binary():
    qrels = beir.read_qrels(TINY / "qrels" / "test.tsv")
    assert qrels["q2"] == {"2": 2, "3": 0}
    assert beir.gold_entries(qrels["q2"]) == ["d/2#"]
    assert beir.gold_entries(qrels["q3"]) == ["d/4#", "d/5#"]


def test_the_train_split_comes_from_the_claims_evidence_outside_the_test_qrels():
    queries = beir.load_queries(TINY)
    assert beir.load_qrels(TINY, "train", queries) == {"q4": {"10": 1}, "q5": {"3": 1}}


@pytest.mark.parametrize("split", ["test", "train"])
def test_figures_equal_pytrec_eval(split):
    result = beir.measure(TINY, "bm25", split, verify=True)
    assert result["max_abs_difference"] < 1e-9
    assert result["queries"] == (3 if split == "test" else 2)
    assert 0 < result["ndcg@10"] <= 1 and 0 < result["recall@100"] <= 1


def test_project_metrics_agree_with_pytrec_eval_on_hand_made_rankings():
    qrels = beir.read_qrels(TINY / "qrels" / "test.tsv")
    ranked = {
        "q1": ["d/10#", "d/2#", "d/1#"],  # both relevant, at ranks 1 and 3
        "q2": ["d/3#", "d/1#"],  # the relevant document missed
        "q3": ["d/5#"],
    }
    ours = beir.score(ranked, qrels)
    assert ours == pytest.approx(beir.score_with_pytrec(ranked, qrels))
    expected_q1 = (1 + 1 / 2) / (1 + 1 / 1.584962500721156)
    assert ours["ndcg@10"] == pytest.approx((expected_q1 + 0 + 1 / (1 + 1 / 1.584962500721156)) / 3)
    assert ours["recall@100"] == pytest.approx((1 + 0 + 0.5) / 3)


def test_the_script_prints_json(capsys, tmp_path):
    beir.main(["--data", str(TINY), "--json", "--set", "k1=0.9", "--index-dir", str(tmp_path / "index")])
    result = json.loads(capsys.readouterr().out)
    assert result["settings"]["k1"] == 0.9 and result["timings"]["index"] == "built"
    assert set(result["published"]) == {"bm25-anserini-flat", "bm25-anserini-multifield", "all-MiniLM-L6-v2"}
    beir.main(["--data", str(TINY), "--json", "--set", "k1=0.9", "--index-dir", str(tmp_path / "index")])
    assert json.loads(capsys.readouterr().out)["timings"]["index"] == "reused"


def test_the_script_runs_as_a_module_with_static_score_fusion():
    # Regression: the module's main guard stood above parse_settings, so `python -m` failed.
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.beir", "--data", str(TINY), "--retriever", "static-scores", "--json"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["settings"]["fusion"] == "scores" and result["settings"]["embedder"] == "static"
    assert 0 < result["ndcg@10"] <= 1


def test_speed_questions_are_drawn_from_the_docs_deterministically():
    corpus = load_corpus(DATA / "retrieval" / "docs")
    questions = make_questions(corpus, 20)
    assert questions == make_questions(corpus, 20)
    assert len(questions) == 20 and all(section in corpus.sections for _, section in questions)
    assert all(q.endswith("?") for q, _ in questions)
