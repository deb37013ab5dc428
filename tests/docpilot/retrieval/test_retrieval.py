"""The BM25 retriever on a three-page corpus written for these tests."""

from __future__ import annotations

import json
import shutil

import pytest

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.errors import ConfigError
from docpilot.retrieval.rankers import Retriever, in_scope
from tests.conftest import DATA

DOCS = DATA / "pipeline" / "docs"


@pytest.fixture(scope="module")
def retriever():
    return Retriever(load_corpus(DOCS))


def test_the_section_that_answers_ranks_first(retriever):
    hits = retriever.search("How can I roll back to the previous release?")
    assert hits[0].section_id == "guide/deploy#rollback"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_sections_appear_once_and_top_k_caps_the_list(retriever):
    hits = retriever.search("acme token deploy install release", k=3)
    assert len(hits) == 3
    assert len({h.section_id for h in hits}) == 3


def test_a_question_with_no_known_word_retrieves_nothing(retriever):
    assert retriever.search("zyxwv qwertz") == []


def test_scope_restricts_to_page_prefixes(retriever):
    hits = retriever.search("token", scope=["guide/deploy"])
    assert hits == [] or all(h.section_id.startswith("guide/deploy#") for h in hits)
    scoped = retriever.search("How do I install Acme?", scope=["guide"])
    assert scoped and all(h.section_id.startswith("guide/") for h in scoped)


# Regression: a scope of ["/"] retrieved nothing, while the scope-violation count read it as every page.
@pytest.mark.parametrize("root", [["/"], ["//"], ["/", "guide"]])
def test_a_root_scope_ranks_exactly_as_no_scope(retriever, root):
    for question in ("How do I install Acme?", "How can I roll back to the previous release?"):
        unscoped = retriever.search(question)
        assert unscoped and retriever.search(question, scope=root) == unscoped


def test_a_prefix_with_a_leading_slash_is_the_same_prefix(retriever):
    question = "How do I install Acme?"
    assert retriever.search(question, scope=["/guide/"]) == retriever.search(question, scope=["guide"])


def test_in_scope_matches_whole_path_segments():
    assert in_scope("guide/auth", ["guide"])
    assert in_scope("guide/auth", ["guide/auth"])
    assert not in_scope("guidebook/x", ["guide"])
    assert in_scope("anything", None)


def test_heading_words_count(retriever):
    # "Rotating tokens" is a heading; the section text says "Rotate a token".
    assert retriever.search("rotating")[0].section_id == "guide/auth#rotating-tokens"


def test_vocabulary_bridges_user_words_to_doc_words(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    question = "Can I undo my last upload?"
    without = Retriever(load_corpus(docs)).search(question)
    assert without[0].section_id == "guide/deploy#deploy-a-site"  # "upload" is in the deploy text
    (docs / "vocabulary.json").write_text(json.dumps({"undo": ["rollback", "previous release"]}))
    with_vocabulary = Retriever(load_corpus(docs))
    assert "rollback" in with_vocabulary.query_terms(question)
    assert with_vocabulary.search(question)[0].section_id == "guide/deploy#rollback"


def test_fingerprint_follows_settings(retriever):
    other = Retriever(retriever.corpus, RetrievalConfig(k1=1.5))
    assert other.fingerprint != retriever.fingerprint
    assert Retriever(retriever.corpus).fingerprint == retriever.fingerprint


def test_unknown_retriever_is_a_config_error(retriever):
    with pytest.raises(ConfigError, match="bm25"):
        Retriever(retriever.corpus, RetrievalConfig(retriever="tfidf"))


# --- fields, vocabulary, scope for every retriever, fusion -------------------------------

from docpilot.retrieval.rankers import reciprocal_rank_fusion  # noqa: E402
from tests.docpilot.retrieval.test_embedders import WordHashEmbedder  # noqa: E402

HARBOR = DATA / "retrieval" / "docs"


@pytest.fixture(scope="module")
def harbor():
    return load_corpus(HARBOR)


def _retriever(corpus, kind: str, **settings) -> Retriever:
    embedder = WordHashEmbedder() if kind != "bm25" else None
    return Retriever(corpus, RetrievalConfig(retriever=kind, **settings), embedder=embedder)


@pytest.mark.parametrize(
    ("question", "page"),
    [
        ("berth", "guide/moorings"),  # front matter description only
        ("anchorage", "guide/moorings"),  # front matter keywords only
        ("tariff", "reference/fees"),  # the page's llms.txt description only
        ("moorings", "guide/moorings"),  # page title only
    ],
)
def test_a_word_only_in_the_page_metadata_finds_the_page(harbor, question, page):
    hits = Retriever(harbor).search(question)
    assert hits and hits[0].section_id.startswith(page + "#")
    # Every chunk of the page carries the description, so the whole page ranks first.
    assert {h.section_id.partition("#")[0] for h in hits} == {page}


def test_a_word_only_in_a_heading_finds_that_section(harbor):
    assert Retriever(harbor).search("slack")[0].section_id == "guide/tides#slack-water"


def test_weights_of_zero_leave_the_fields_out(harbor):
    bare = Retriever(harbor, RetrievalConfig(title_weight=0, description_weight=0))
    assert bare.search("berth") == []
    assert bare.search("slack") == []
    assert bare.search("pause flood ebb")[0].section_id == "guide/tides#slack-water"


def test_a_heavier_title_weight_raises_a_heading_match(harbor):
    question = "slack water turn ship"
    light = Retriever(harbor, RetrievalConfig(title_weight=1)).search(question)[0]
    heavy = Retriever(harbor, RetrievalConfig(title_weight=3)).search(question)[0]
    assert light.section_id == heavy.section_id == "guide/tides#slack-water"
    assert heavy.score > light.score


def test_vocabulary_phrases_expand_only_when_the_whole_phrase_is_asked(harbor):
    retriever = Retriever(harbor)
    assert "moor" in retriever.query_terms("Where is my parking spot?")
    assert "moor" not in retriever.query_terms("Is parking near the spot?")
    assert retriever.search("Where is my parking spot?")[0].section_id.startswith("guide/moorings#")
    expanded = retriever.query_terms("What happens at low tide?")
    assert {"draught", "shallow"} <= set(expanded)
    assert retriever.search("What happens at low tide?")[0].section_id == "guide/tides#high-water"
    off = Retriever(harbor, RetrievalConfig(use_vocabulary=False))
    assert "moor" not in off.query_terms("Where is my parking spot?")


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_scope_holds_for_every_retriever(harbor, kind):
    retriever = _retriever(harbor, kind)
    question = "ship place rate tide printing schedule"
    everywhere = retriever.search(question, k=20)
    assert {h.section_id.partition("#")[0] for h in everywhere} >= {"guide/tides", "guidebook", "reference/fees"}
    guide = retriever.search(question, scope=["guide"], k=20)
    assert guide and all(h.section_id.startswith(("guide/moorings#", "guide/tides#")) for h in guide)
    assert retriever.search(question, scope=["reference/fees"], k=20)[0].section_id.startswith("reference/fees#")
    assert retriever.search(question, scope=[], k=20) == []
    assert retriever.search(question, scope=["nowhere"], k=20) == []
    # The same scope twice gives the same list (its mask is kept between searches).
    assert retriever.search(question, scope=["guide"], k=20) == guide


@pytest.mark.parametrize(("kind", "fusion"), [("dense", "scores"), ("hybrid", "rrf")])
def test_dense_retrievers_find_the_page_by_its_words(harbor, kind, fusion):
    hits = _retriever(harbor, kind, fusion=fusion).search("deep draught high water entry")
    assert hits[0].section_id == "guide/tides#high-water"
    assert len({h.section_id for h in hits}) == len(hits) == 8


def test_hybrid_fuses_scores_by_default_and_ranks_only_sections_sharing_a_word(harbor):
    assert RetrievalConfig().fusion == "scores"
    hits = _retriever(harbor, "hybrid").search("deep draught high water entry")
    assert hits[0].section_id == "guide/tides#high-water"
    assert {h.section_id for h in hits} == {h.section_id for h in _retriever(harbor, "bm25").search("deep draught high water entry")}


def test_fusion_adds_weighted_reciprocal_ranks():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=60)
    assert [item for item, _ in fused] == ["a", "c", "b", "d"]
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["d"] == pytest.approx(1 / 63)


def test_fusion_weights_and_ties():
    only_second = reciprocal_rank_fusion([["a", "b"], ["b", "a"]], [0.0, 1.0], k=1)
    assert [item for item, _ in only_second] == ["b", "a"]
    assert dict(only_second)["b"] == pytest.approx(1 / 2)
    # Equal scores: the better rank first, then the earlier list.
    tied = reciprocal_rank_fusion([["x", "z"], ["y", "w"]], k=60)
    assert [item for item, _ in tied] == ["x", "y", "z", "w"]
    assert reciprocal_rank_fusion([], k=60) == []
    with pytest.raises(ValueError, match="weights"):
        reciprocal_rank_fusion([["a"]], [1.0, 2.0])


def test_hybrid_is_the_fusion_of_the_bm25_and_dense_lists(harbor):
    question = "ship rate per metre of length"
    depth = 5
    lexical = _retriever(harbor, "bm25").search(question, k=depth)
    dense = _retriever(harbor, "dense").search(question, k=depth)
    hybrid = _retriever(harbor, "hybrid", fusion="rrf", fusion_depth=depth, rrf_k=10, dense_weight=0.5).search(
        question, k=4
    )
    expected = reciprocal_rank_fusion(
        [[h.section_id for h in lexical], [h.section_id for h in dense]], [1.0, 0.5], k=10
    )[:4]
    assert [(h.section_id, h.score) for h in hybrid] == [(s, round(v, 6)) for s, v in expected]


def test_top_sections_keeps_corpus_order_on_ties(harbor):
    # "ship" is in many sections with equal weight; a wide cut and a narrow one agree.
    retriever = Retriever(harbor)
    wide = retriever.search("ship", k=12)
    narrow = retriever.search("ship", k=2)
    assert [h.section_id for h in narrow] == [h.section_id for h in wide[:2]]


def test_the_fingerprint_ignores_where_the_index_is_kept(harbor):
    here = Retriever(harbor, RetrievalConfig(retriever="bm25", index_dir="a"))
    there = Retriever(harbor, RetrievalConfig(retriever="bm25", index_dir="b", embedding_batch_size=3))
    assert here.fingerprint == there.fingerprint
    assert Retriever(harbor, RetrievalConfig(retriever="bm25", title_weight=3)).fingerprint != here.fingerprint
    # Settings another retriever would read leave this one's cached rankings valid.
    assert Retriever(harbor, RetrievalConfig(retriever="bm25", embedder="openai", rrf_k=5)).fingerprint == here.fingerprint
    hybrid = _retriever(harbor, "hybrid")
    assert _retriever(harbor, "hybrid", rrf_k=5).fingerprint != hybrid.fingerprint
    assert _retriever(harbor, "hybrid", k1=0.5).fingerprint != hybrid.fingerprint
    assert _retriever(harbor, "dense", k1=0.5).fingerprint == _retriever(harbor, "dense").fingerprint


def test_open_rejects_an_unknown_retriever(harbor, tmp_path):
    with pytest.raises(ConfigError, match="bm25, dense, hybrid"):
        Retriever.open(harbor, RetrievalConfig(retriever="splade"), cache_dir=tmp_path)


def test_the_fingerprint_follows_chunking(tmp_path):
    # Regression: the corpus fingerprint hashes files only, so chunk size must enter on its own.
    small = Retriever(load_corpus(DOCS, chunk_words=20))
    large = Retriever(load_corpus(DOCS, chunk_words=220))
    assert small.fingerprint != large.fingerprint


# --- reference pages -----------------------------------------------------------------

from pydantic import ValidationError  # noqa: E402

from docpilot.retrieval.rankers import is_reference_page  # noqa: E402


@pytest.fixture
def with_reference(tmp_path):
    """A guide that answers a question and a generated CLI reference that repeats its words."""
    docs = tmp_path / "docs"
    (docs / "guides").mkdir(parents=True)
    (docs / "v3" / "api-ref" / "cli").mkdir(parents=True)
    (docs / "guides" / "logging.md").write_text(
        "# Logging\n\n## Print statements\n\nSet log_prints=True on the flow so print output is captured.\n"
    )
    (docs / "v3" / "api-ref" / "cli" / "flow-run.md").write_text(
        "# flow-run\n\n## prefect flow-run logs\n\nShow the logs of a flow run, with the output of print.\n"
    )
    return load_corpus(docs)


def test_a_lower_reference_weight_ranks_the_guide_above_the_reference(with_reference):
    question = "how do I get print output into the run logs"
    plain = Retriever(with_reference, RetrievalConfig(retriever="bm25")).search(question)
    assert plain[0].section_id == "v3/api-ref/cli/flow-run#prefect-flow-run-logs"
    weighted = Retriever(with_reference, RetrievalConfig(retriever="bm25", reference_weight=0.5)).search(question)
    assert weighted[0].section_id == "guides/logging#print-statements"
    reference = next(h for h in weighted if h.section_id == "v3/api-ref/cli/flow-run#prefect-flow-run-logs")
    unweighted = next(h for h in plain if h.section_id == reference.section_id)
    assert reference.score == pytest.approx(unweighted.score * 0.5, rel=1e-5)
    # Weight 0 leaves reference pages out of the list; no names leaves every page as it was.
    gone = Retriever(with_reference, RetrievalConfig(retriever="bm25", reference_weight=0.0)).search(question)
    assert [h.section_id.partition("#")[0] for h in gone] == ["guides/logging"] * len(gone)
    unnamed = Retriever(with_reference, RetrievalConfig(retriever="bm25", reference_pages=[], reference_weight=0.5)).search(question)
    assert [(h.section_id, h.score) for h in unnamed] == [(h.section_id, h.score) for h in plain]


@pytest.fixture
def crowded(tmp_path):
    """Six CLI reference sections that repeat the question's words, six guide sections that use them once."""
    docs = tmp_path / "docs"
    (docs / "api-ref").mkdir(parents=True)
    commands = "".join(f"## deploy cmd{n}\n\nDeploy schedule deploy schedule option {n}.\n\n" for n in range(6))
    (docs / "api-ref" / "cli.md").write_text("# CLI\n\n" + commands)
    steps = "".join(f"## Step {n}\n\nA deploy runs on a schedule, step {n} of the guide.\n\n" for n in range(6))
    (docs / "guide.md").write_text("# Guide\n\n" + steps)
    return load_corpus(docs)


def test_reference_sections_hold_at_most_reference_slots_of_the_first_places(crowded):
    question = "deploy on a schedule"
    free = [h.section_id for h in Retriever(crowded, RetrievalConfig(reference_slots=8)).search(question, k=20)]
    assert [s.startswith("api-ref/") for s in free[:6]] == [True] * 6  # by score, the reference fills the top
    capped = [h.section_id for h in Retriever(crowded).search(question, k=20)]
    references = [s for s in free if s.startswith("api-ref/")]
    others = [s for s in free if not s.startswith("api-ref/")]
    # The first 8 places: the 3 best reference sections and the 5 best others, each in score order;
    # then the reference sections over the limit, then the rest.
    assert capped[:8] == [s for s in free if s in references[:3] + others[:5]]
    assert capped[8:] == references[3:] + others[5:]
    assert sorted(capped) == sorted(free)
    # k below top_k cuts the capped list; slots of 0 keep the first places for the others.
    assert [h.section_id for h in Retriever(crowded).search(question, k=4)] == capped[:4]
    none = [h.section_id for h in Retriever(crowded, RetrievalConfig(reference_slots=0)).search(question, k=20)]
    assert none == others[:6] + references + others[6:]


def test_reference_names_match_whole_path_parts():
    names = ["api-ref", "release-notes", "v2/reference"]
    assert is_reference_page("v3/api-ref/cli/flow-run", names)
    assert is_reference_page("release-notes", names)
    assert is_reference_page("docs/v2/reference/x", names)
    assert not is_reference_page("api-refs/x", names)
    assert not is_reference_page("guide/my-api-ref", names)
    assert not is_reference_page("reference/x", names)  # only the run "v2/reference" is named
    assert not is_reference_page("v3/api-ref", [])


def test_reference_settings_are_ranking_settings(with_reference):
    base = Retriever(with_reference)
    for changed in ({"reference_weight": 0.3}, {"reference_pages": ["api"]}, {"reference_slots": 1}):
        assert Retriever(with_reference, RetrievalConfig(**changed)).fingerprint != base.fingerprint
    dense = _retriever(with_reference, "dense")
    assert _retriever(with_reference, "dense", reference_weight=0.3).fingerprint == dense.fingerprint
    assert _retriever(with_reference, "dense", reference_slots=1).fingerprint != dense.fingerprint


@pytest.mark.parametrize(
    "bad", [{"reference_weight": -0.1}, {"reference_slots": -1}, {"reference_pages": [""]}, {"reference_pages": ["/api"]}]
)
def test_bad_reference_settings_are_rejected(bad):
    with pytest.raises(ValidationError):
        RetrievalConfig(**bad)
