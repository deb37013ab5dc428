"""Citation metrics: did the answer name the right passages, and only real ones.

``citations`` on a row are the section ids behind markers that resolved to a primed
source, or, for a target that lists what it cites apart from its text
(``reply.citations``), behind the listed items that named a returned source; a section
cited twice counts once. The last three functions give counts:
any record they count fails the run (except unlinked negatives, reported apart).
"""

from __future__ import annotations

from docpilot.metrics.gold import in_scope, is_relevant, matches, unique

from docpilot.schema import Row


def citation_precision(row: Row) -> float:
    """Share of the distinct cited sections that match a gold entry.

        CP = |{c ∈ cited : c is relevant}| / |cited|

    Defined for answers with at least one citation.
    """
    cited = unique(row.citations)
    return sum(1 for section in cited if is_relevant(section, row.gold)) / len(cited)


def citation_recall(row: Row) -> float:
    """Share of the gold entries matched by at least one cited section; 0 with no citations.

        CR = |{g ∈ gold : ∃ c ∈ cited, c matches g}| / |gold|
    """
    entries = unique(row.gold)
    cited = unique(row.citations)
    return sum(1 for entry in entries if any(matches(c, entry) for c in cited)) / len(entries)


def hallucinated_citations(row: Row) -> int:
    """How many markers in the answer point at no primed source.

    A number no primed source carries and a bracketed section id that was not primed
    both count, and so does a listed citation of a target that names none of the
    sources it returned: the renderer records each in ``row.hallucinated``.
    """
    return len(row.hallucinated)


def sources_outside_docs(row: Row) -> int:
    """How many of the sources an assistant returned name nothing the docs hold.

    A target's source may name a page outside the docs folder (a blog post), or an
    anchor or heading its page lacks: each is kept in the row's ``outside_docs``, ranked
    where it came (it matches no gold entry), and counted here.
    """
    return len(row.outside_docs)


def scope_violations(row: Row) -> int:
    """How many distinct retrieved or cited sections lie outside the record's scope.

    A section is inside when its page equals a scope prefix or is nested under one
    (the page-pin rule of ``metrics.gold``); a record without a scope has none.
    """
    if row.scope is None:
        return 0
    sections = unique([*row.retrieved, *row.citations])
    return sum(1 for section in sections if not in_scope(section, row.scope))


def is_unlinked(row: Row) -> bool:
    """Whether an answered turn listed Sources under the answer but had no working link."""
    return row.answered and bool(row.sources_shown) and row.links == 0


def unlinked_answers(row: Row) -> int:
    """1 for an answered positive shown with Sources and no working link, else 0."""
    return int(row.kind == "positive" and is_unlinked(row))


def unlinked_negatives(row: Row) -> int:
    """1 for an answered negative shown with Sources and no working link, else 0."""
    return int(row.kind == "negative" and is_unlinked(row))
