"""Stage keys name the code that computed a result: evals run from edited copies of the tree."""

from __future__ import annotations

import pytest

from docpilot.cache import StageCache
from docpilot.codebase import digest_code
from docpilot.models.base import REPLY_FIELDS
from docpilot.models.registry import PROVIDERS
from docpilot.retrieval.index import _LEXICAL_CODE, _VECTOR_CODE
from docpilot.retrieval.rankers import RANKING_CODE
from tests.conftest import DATA, ROOT
from tests.support.openai_server import OpenAIScript, Reply, serve_openai
from tests.support.tree_copy import copy_tree, edit_source, eval_from

pytestmark = pytest.mark.slow

PIPELINE = DATA / "pipeline"
RECORDS = ("--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"))
REFUSAL = "Refuse: not-answerable\nThe documentation does not say."


# Regression: the ranking key held no code version, so rankings cached by other retriever
# code were reused while the report stamped the new code's fingerprint.
def test_an_edited_retriever_ranks_afresh_and_an_unedited_copy_reuses(tmp_path):
    first = eval_from(copy_tree(tmp_path / "one"), tmp_path / "1.json", "--gate-only", *RECORDS, cwd=tmp_path)
    assert first["cache_stats"]["retrieve"] == {"reused": 0, "computed": 6}

    other = copy_tree(tmp_path / "other")  # the same code in another folder
    again = eval_from(other, tmp_path / "2.json", "--gate-only", *RECORDS, cwd=tmp_path)
    assert again["cache_stats"]["retrieve"] == {"reused": 6, "computed": 0}

    edit_source(other, "docpilot/retrieval/bm25.py", "\n    _FILES = (", "\n    _UNUSED = None\n    _FILES = (")
    edited = eval_from(other, tmp_path / "3.json", "--gate-only", *RECORDS, cwd=tmp_path)
    assert edited["cache_stats"]["retrieve"] == {"reused": 0, "computed": 6}
    assert all(row["cached"] == [] for row in edited["rows"])
    assert [r["retrieved"] for r in edited["rows"]] == [r["retrieved"] for r in first["rows"]]  # a harmless edit
    assert edited["fingerprints"]["code"] != first["fingerprints"]["code"]


# Regression: the turn cache stored what a reply was read to mean (refused, refusal_cause,
# truncated, error), so a change of the refusal rule left cached turns read by the old one.
def test_a_cached_reply_is_read_by_the_refusal_rule_of_the_code_that_reads_it(tmp_path):
    older = copy_tree(tmp_path / "older")
    # An older, stricter rule: only an upper-case REFUSE: line is a refusal.
    edit_source(older, "docpilot/models/base.py", "\\s*([a-z-]+)\", re.IGNORECASE)", "\\s*([a-z-]+)\")")
    script = OpenAIScript(default=Reply(answer=REFUSAL))
    with serve_openai(script) as base_url:
        hosted = ("--provider", "openai", "--base-url", base_url, "--model", "scripted", *RECORDS)
        before = eval_from(older, tmp_path / "older.json", *hosted, cwd=tmp_path)
        asked = len(script.history)
        now = eval_from(ROOT, tmp_path / "now.json", *hosted, cwd=tmp_path)
        turns_asked_again = [r for r in script.history[asked:] if r.body.get("max_tokens") != 1]  # not the probe

    modelled = [r for r in before["rows"] if r["refused_by"] != "gate"]
    assert modelled and all(not r["refused"] and r["answer"] == REFUSAL for r in modelled)
    assert turns_asked_again == [] and now["cache_stats"]["model"]["computed"] == 0
    for row in (r for r in now["rows"] if r["refused_by"] != "gate"):
        assert "model" in row["cached"]
        assert (row["refused"], row["refused_by"], row["refusal_cause"]) == (True, "model", "not-answerable")

    cache = StageCache(tmp_path / "cache")
    try:
        entries = [cache.get(k) for k in cache._store.iterkeys() if str(k).startswith("model:")]
    finally:
        cache.close()
    assert len(entries) == len(modelled)
    for entry in entries:
        assert set(entry) == {"reply", "languages"} and set(entry["reply"]) <= REPLY_FIELDS
        assert entry["reply"]["answer"] == REFUSAL and entry["reply"]["finish_reason"] == "stop"
        assert not {"refused", "refusal_cause", "truncated", "error", "error_code"} & set(entry["reply"])


def test_every_module_a_stage_names_exists():
    for modules in (RANKING_CODE, _LEXICAL_CODE, _VECTOR_CODE, *(p.code for p in PROVIDERS.values())):
        assert len(digest_code(*modules)) == 64


def test_a_module_that_does_not_exist_is_an_error_not_an_empty_digest():
    with pytest.raises(LookupError, match="docpilot.retrieval.nowhere"):
        digest_code("docpilot.retrieval", "docpilot.retrieval.nowhere")


def test_the_refusal_rules_are_not_in_a_hosted_models_key():
    # Otherwise a change of them would ask the service again instead of reading the stored reply anew.
    for provider in ("openai", "local"):
        assert not any(m in ("docpilot.models", "docpilot.models.base") for m in PROVIDERS[provider].code)
