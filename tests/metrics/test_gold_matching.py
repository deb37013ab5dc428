"""Gold matching (DESIGN §3): the three forms of a gold entry, and scope containment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docpilot.metrics.gold import in_scope, is_relevant, is_under, matches, page_of, scope_prefix, unique

CASES = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "metrics" / "gold_cases.json").read_text()
)


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c['section']} ~ {c['entry']}" for c in CASES]
)
def test_matches_follows_the_case_table(case: dict) -> None:
    assert matches(case["section"], case["entry"]) is case["matches"], case["why"]


def test_is_relevant_is_any_entry() -> None:
    gold = ["guide/auth#request", "reference/cli#"]
    assert is_relevant("reference/cli#eval", gold)
    assert is_relevant("guide/auth#request", gold)
    assert not is_relevant("guide/auth#response", gold)
    assert not is_relevant("reference/cli/flags#x", gold)
    assert not is_relevant("guide/auth#request", [])


def test_page_of_drops_the_anchor() -> None:
    assert page_of("guide/auth#request") == "guide/auth"
    assert page_of("guide/auth#") == "guide/auth"
    assert page_of("guide/auth") == "guide/auth"


def test_is_under_compares_whole_segments() -> None:
    assert is_under("guide/auth", "guide")
    assert is_under("guide", "guide")
    assert not is_under("guides/x", "guide")
    assert is_under("anything/at/all", "")


def test_in_scope_uses_the_page_pin_rule() -> None:
    scope = ["guide/auth", "reference"]
    assert in_scope("guide/auth#x", scope)
    assert in_scope("guide/auth/tokens#x", scope)
    assert in_scope("reference/cli#eval", scope)
    assert not in_scope("guide/authz#x", scope)
    assert not in_scope("guide#auth", scope)


def test_no_scope_allows_everything_and_an_empty_scope_nothing() -> None:
    assert in_scope("any/page#x", None)
    assert not in_scope("any/page#x", [])


def test_a_root_scope_allows_every_section_as_no_scope_does() -> None:
    for section in ("index#install", "guide/auth#tokens", "a/b/c#", "guide"):
        assert in_scope(section, ["/"]) and in_scope(section, ["//"])


def test_slashes_at_either_end_of_a_prefix_do_not_matter() -> None:
    assert scope_prefix("/guide/auth/") == "guide/auth" and scope_prefix("/") == ""
    for prefix in ("guide", "guide/", "/guide", "/guide/"):
        assert in_scope("guide/auth#x", [prefix]) and not in_scope("guides/x#y", [prefix])


def test_unique_keeps_first_seen_order() -> None:
    assert unique(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


def test_the_examples_in_the_docstrings_hold() -> None:
    import doctest

    import docpilot.metrics.gold

    result = doctest.testmod(docpilot.metrics.gold)
    assert result.attempted >= 5
    assert result.failed == 0


# `page#(top)`: the text above a page's first heading, and nothing else of the page.

TOP_RANKING = ["index#install", "index#", "guide/auth#tokens"]


def test_top_matches_only_the_preamble_section():
    from docpilot.metrics.gold import matches, pins_one_section

    assert matches("index#", "index#(top)")
    assert not matches("index#install", "index#(top)")
    assert not matches("index", "index#(top)")
    assert not matches("index/sub#", "index#(top)")
    assert pins_one_section("index#install") and not pins_one_section("index#(top)")
    assert not pins_one_section("index#") and not pins_one_section("index")


def test_top_is_judged_alike_by_the_batch_and_the_per_record_metrics():
    # The batch judge takes a fast path for entries that pin one section by string equality;
    # `index#(top)` must not take it, as its section id `index#` is another string.
    from docpilot.metrics.relevance import judge, reciprocal_ranks
    from docpilot.metrics.retrieval import reciprocal_rank

    records = [(TOP_RANKING, ["index#(top)"]), (TOP_RANKING, ["index#"]), (TOP_RANKING, ["index#install"])]
    assert list(reciprocal_ranks(judge(records))) == [0.5, 1.0, 1.0]
    assert [reciprocal_rank(r, g) for r, g in records] == [0.5, 1.0, 1.0]
