"""Gold matching: whether a retrieved or cited section counts for a gold entry.

Section ids are ``page#anchor`` (DESIGN §3). A gold entry takes one of four forms:

======================  ========================================================
``guide/auth``          every section of page ``guide/auth`` and of the pages
                        nested under it (``guide/auth/tokens#x``), but not
                        ``guide/authz#x``
``guide/auth#``         any section of page ``guide/auth``, and no nested page
``guide/auth#req``      section ``guide/auth#req`` only
``guide/auth#(top)``    the text above the page's first heading only (its section
                        id is ``guide/auth#``, which as an entry means any section)
======================  ========================================================

``(top)`` cannot be a heading's anchor: a GitHub slug keeps only letters, digits,
``_``, ``-`` and spaces, and an explicit ``{ #id }`` no parentheses, so the spelling
never names a real heading.

A record's ``scope`` (and a server request's) is a list of page-id prefixes read by
one rule, ``in_scope``, which the retriever, the scope-violation count and the server
all use: a section is in scope when its page equals one of the prefixes or is nested
under it. A prefix is a path from the docs root, so slashes at its ends are dropped
(``/guide/`` is ``guide``) and ``/`` names the root itself: the whole docs tree.
"""

from __future__ import annotations

from collections.abc import Iterable

TOP = "(top)"
"""The anchor a gold entry uses for the text above a page's first heading (``page#(top)``)."""


def pins_one_section(entry: str) -> bool:
    """Whether a gold entry names exactly one section id that a ranked section must equal.

    ``page#anchor`` does; ``page`` and ``page#`` match many sections, and
    ``page#(top)`` matches the section ``page#``, a different string.
    """
    anchor = entry.partition("#")[2]
    return bool(anchor) and anchor != TOP


def page_of(section_id: str) -> str:
    """The page id of a section id (the part before ``#``; the whole id when there is none)."""
    return section_id.partition("#")[0]


def is_under(page: str, prefix: str) -> bool:
    """Whether ``page`` is the page ``prefix`` or a page nested under it.

    The comparison is by whole path segments, so ``guide/authz`` is not under
    ``guide/auth``. A trailing ``/`` on the prefix is ignored, and an empty prefix
    names the docs root, under which every page lies.
    """
    prefix = prefix.rstrip("/")
    if not prefix:
        return True
    return page == prefix or page.startswith(prefix + "/")


def matches(section_id: str, entry: str) -> bool:
    """Whether the section ``section_id`` satisfies the gold entry ``entry``.

    >>> matches("guide/auth/tokens#rotate", "guide/auth")
    True
    >>> matches("guide/authz#roles", "guide/auth")
    False
    >>> matches("guide/auth#request", "guide/auth#")
    True
    >>> matches("guide/auth/tokens#rotate", "guide/auth#")
    False
    >>> matches("guide/auth#response", "guide/auth#request")
    False
    >>> matches("guide/auth#", "guide/auth#(top)")
    True
    >>> matches("guide/auth#request", "guide/auth#(top)")
    False
    """
    page, _, anchor = section_id.partition("#")
    if "#" not in entry:
        return is_under(page, entry)
    entry_page, _, entry_anchor = entry.partition("#")
    if page != entry_page:
        return False
    if entry_anchor == TOP:
        return anchor == "" and "#" in section_id
    return entry_anchor == "" or anchor == entry_anchor


def is_relevant(section_id: str, gold: Iterable[str]) -> bool:
    """Whether ``section_id`` matches any entry of ``gold`` (binary relevance)."""
    return any(matches(section_id, entry) for entry in gold)


def scope_prefix(entry: str) -> str:
    """The page-id prefix a scope entry names: its slashes at either end dropped.

    ``guide/`` and ``/guide`` are ``guide``; ``/`` is ``""``, the docs root, under
    which every page lies.
    """
    return entry.strip("/")


def in_scope(section_id: str, scope: Iterable[str] | None) -> bool:
    """Whether a section (or page) id lies under one of the page-id prefixes of ``scope``.

    This is the one scope rule: the retriever masks by it, ``scope_violations`` counts
    by it, and the server accepts the entries it reads. ``None`` means the turn had the
    whole corpus, so every section is in scope; so does an entry ``/`` (the docs root);
    an empty list allows nothing.

    >>> in_scope("guide/auth#tokens", ["/"])
    True
    >>> in_scope("guide/auth#tokens", ["/guide/"])
    True
    >>> in_scope("guides/x#y", ["guide"])
    False
    """
    if scope is None:
        return True
    page = page_of(section_id)
    return any(is_under(page, scope_prefix(entry)) for entry in scope)


def unique(entries: Iterable[str]) -> list[str]:
    """The entries in their first-seen order with repeats dropped.

    Metrics count a gold entry or a cited section once however often it is listed.
    """
    return list(dict.fromkeys(entries))
