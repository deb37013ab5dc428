"""The docs corpus: pages, their sections and the chunks a retriever indexes.

``load_corpus`` walks a folder of Markdown/MDX pages and gives each page, section and
chunk the ids of DESIGN §3. It also reads two optional files at the folder's root:
``vocabulary.json`` (user words → doc words) and ``llms.txt`` (page descriptions).
Everything is read once, in sorted order, so two loads of the same files are equal
and carry the same fingerprint.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docpilot.corpus.chunking import chunk_texts
from docpilot.corpus.discovery import find_pages
from docpilot.corpus.markdown import ParsedPage, parse_page
from docpilot.corpus.sidecar import parse_llms, parse_vocabulary
from docpilot.corpus.targets import FolderTargets, page_title
from docpilot.errors import ConfigError, CorpusError
from docpilot.metrics.gold import TOP
from docpilot.userfiles.intake import DOCS_FILE, read_bytes

VOCABULARY_FILE = "vocabulary.json"
LLMS_FILE = "llms.txt"
# Bump when parsing or chunking changes, so caches keyed on the fingerprint go stale.
_FORMAT_VERSION = "docpilot-corpus-2"

# "- [Name](url): description", the list item of an llms.txt section


@dataclass(frozen=True, slots=True)
class Section:
    """One heading of a page and the text under it, up to the next heading."""

    id: str
    """``page#anchor``; ``page#`` for the text before the first heading (a gold entry pins it as ``page#(top)``)."""
    page_id: str
    """The page it belongs to."""
    anchor: str
    """Explicit heading id, else the heading's slug made unique in its page; '' for the preamble."""
    title: str
    """Heading text as plain text; '' for the preamble."""
    heading_path: tuple[str, ...]
    """Page title, then the headings above this one and this one."""
    level: int
    """Heading level 1–6; 0 for the preamble."""
    text: str
    """The section's text, markup reduced, code fences as written."""
    links: tuple[str, ...] = ()
    """Page or section ids of the corpus that its cross-references name (``relref``, ``{ref}``, ``{doc}``)."""


@dataclass(frozen=True, slots=True)
class Page:
    """One Markdown or MDX file of the corpus."""

    id: str
    """Path under the root without extension; an ``index`` file names its folder."""
    path: str
    """File path relative to the root, with '/' separators."""
    title: str
    """Front matter title, else the first level-1 heading, else the last part of the id."""
    description: str | None
    """Front matter description, else the page's entry in ``llms.txt``, else None."""
    keywords: tuple[str, ...]
    """Front matter keywords (a list or a comma-separated string)."""
    sections: tuple[Section, ...]
    """The page's sections in document order; never empty."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Kind of generator construct → how many the reading dropped with nothing kept (``docpilot index`` shows them)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrievable piece of one section; a long section gives several."""

    id: str
    """``section_id@n`` with n counting from 0 within the section."""
    section_id: str
    """The section the text comes from; rows store this id."""
    page_id: str
    """The page the section belongs to."""
    page_title: str
    """The page's title."""
    heading_path: tuple[str, ...]
    """The section's heading path (page title first)."""
    text: str
    """At most ``chunk_words`` words of the section's text."""


@dataclass(frozen=True, eq=False)
class Corpus:
    """Every page, section and chunk of a docs folder, with the folder's vocabulary."""

    root: Path
    """The docs folder, resolved."""
    pages: dict[str, Page]
    """Pages by id, in sorted path order."""
    sections: dict[str, Section]
    """Sections by id, page by page in document order."""
    chunks: tuple[Chunk, ...]
    """Chunks in section order."""
    vocabulary: dict[str, list[str]]
    """User word or phrase → doc words, from ``vocabulary.json``; empty without one."""
    fingerprint: str
    """sha256 of every page's path and bytes plus ``vocabulary.json`` and ``llms.txt``."""
    side_files: dict[str, str] = field(default_factory=dict)
    """Side file name (``vocabulary.json``, ``llms.txt``) → sha256 of its bytes, for each the folder has."""
    _prefixes: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        prefixes = set()
        for page_id in self.pages:
            parts = page_id.split("/")
            prefixes.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        object.__setattr__(self, "_prefixes", frozenset(prefixes))

    def has_entry(self, gold_entry: str) -> bool:
        """Tell whether a gold entry (``page``, ``page#`` or ``page#anchor``) names something here.

        A bare page entry also counts when pages are nested under it, since it
        matches their sections too (DESIGN §3).
        """
        page_id, hash_, anchor = gold_entry.partition("#")
        if not hash_:
            return page_id in self._prefixes
        if not anchor:
            return page_id in self.pages
        if anchor == TOP:
            return f"{page_id}#" in self.sections  # only when the page has text above its first heading
        return gold_entry in self.sections

    def closest(self, gold_entry: str, n: int = 3) -> list[str]:
        """Return up to ``n`` existing page or section ids that look most like ``gold_entry``."""
        if n < 1:
            return []
        page_id, hash_, _ = gold_entry.partition("#")
        candidates = list(self.sections) if hash_ else list(self.pages)
        found = difflib.get_close_matches(gold_entry, candidates, n=n, cutoff=0.6)
        if not found and hash_ and page_id in self.pages:
            found = [section.id for section in self.pages[page_id].sections[:n]]
        return found

    def section_url(self, section_id: str, base_url: str) -> str:
        """Return the public link of a section: base URL + page path + ``#anchor``."""
        section = self.sections.get(section_id)
        if section is None:
            raise CorpusError(
                f"no section {section_id!r} in the corpus",
                path=self.root,
                hint=f"use an existing section id, such as {self.closest(section_id) or list(self.sections)[:3]}",
            )
        return section_url(section_id, base_url)


def section_url(section_id: str, base_url: str) -> str:
    """The public link of a section id: base URL + page path + ``#anchor``.

    The top page ``index`` is the base URL itself, and text before a page's first
    heading (``page#``) links to the page. A Hugo section page (``guide/_index.md``,
    page id ``guide/_index``) is served as its folder, ``guide/``, as the generator does.
    """
    page, _, anchor = section_id.partition("#")
    base = base_url if base_url.endswith("/") else base_url + "/"
    if page in ("index", "_index"):
        page = ""
    elif page.endswith("/_index"):
        page = page.removesuffix("_index")
    return base + page + (f"#{anchor}" if anchor else "")


def load_corpus(root: str | Path, *, chunk_words: int = 220) -> Corpus:
    """Read every Markdown/MDX page under ``root`` into pages, sections and chunks."""
    if chunk_words < 1:
        raise ConfigError(
            f"chunk_words must be at least 1, got {chunk_words}",
            hint="set corpus.chunk_words to a positive word count, such as 220",
        )
    shown = Path(root)
    if not shown.is_dir():
        what = "is not a folder" if shown.exists() else "does not exist"
        raise CorpusError(
            f"docs folder {what}",
            path=shown,
            hint="point corpus.docs (or --docs) at the folder holding your .md/.mdx pages",
        )
    real_root = shown.resolve()
    files = find_pages(shown, real_root)
    if not files:
        raise CorpusError(
            "no .md or .mdx pages found in the docs folder",
            path=shown,
            hint="add Markdown pages, or point corpus.docs at the folder that holds them",
        )
    digest = hashlib.sha256(_FORMAT_VERSION.encode())
    parsed_pages: list[tuple[str, str, ParsedPage, str | None]] = []
    owners: dict[str, str] = {}
    for rel in files:
        page_id = _page_id(rel)
        if page_id in owners:
            raise CorpusError(
                f"two files give the page id {page_id!r}: {owners[page_id]} and {rel}",
                path=shown / rel,
                hint="rename or remove one of them",
            )
        owners[page_id] = rel
        text = _read_text(shown / rel, rel, digest)
        parsed = parse_page(text, source=str(shown / rel), mdx=rel.endswith(".mdx"), page_id=page_id)
        parsed_pages.append((page_id, rel, parsed, text if parsed.references else None))
    if any(text is not None for *_, text in parsed_pages):
        # Cross-references name other pages' ids, labels and titles: read their pages again knowing them.
        targets = FolderTargets([(page_id, parsed) for page_id, _, parsed, _ in parsed_pages])
        parsed_pages = [
            (page_id, rel, parsed if text is None else parse_page(
                text, source=str(shown / rel), mdx=rel.endswith(".mdx"), page_id=page_id, targets=targets), None)
            for page_id, rel, parsed, text in parsed_pages
        ]
    vocabulary: dict[str, list[str]] = {}
    side_files: dict[str, str] = {}
    if _root_file(shown, VOCABULARY_FILE, real_root):
        text = _read_text(shown / VOCABULARY_FILE, VOCABULARY_FILE, digest)
        side_files[VOCABULARY_FILE] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        vocabulary = parse_vocabulary(text, shown / VOCABULARY_FILE)
    descriptions: dict[str, str] = {}
    if _root_file(shown, LLMS_FILE, real_root):
        text = _read_text(shown / LLMS_FILE, LLMS_FILE, digest)
        side_files[LLMS_FILE] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        descriptions = parse_llms(text, set(owners))

    pages: dict[str, Page] = {}
    sections: dict[str, Section] = {}
    chunks: list[Chunk] = []
    for page_id, rel, parsed, _ in parsed_pages:
        page = _build_page(page_id, rel, parsed, descriptions.get(page_id))
        pages[page_id] = page
        for section in page.sections:
            sections[section.id] = section
            for n, text in enumerate(chunk_texts(section.text, chunk_words)):
                chunks.append(
                    Chunk(
                        id=f"{section.id}@{n}",
                        section_id=section.id,
                        page_id=page_id,
                        page_title=page.title,
                        heading_path=section.heading_path,
                        text=text,
                    )
                )
    return Corpus(
        root=real_root,
        pages=pages,
        sections=sections,
        chunks=tuple(chunks),
        vocabulary=vocabulary,
        fingerprint=digest.hexdigest(),
        side_files=side_files,
    )


def docs_signature(root: str | Path) -> tuple:
    """What changes when a docs folder's files do: each page's and side file's path, size and times.

    Cheap beside hashing every byte (a walk and a stat per file), so a long-lived process
    can tell at the start of each run whether the corpus it holds is still the folder's.
    """
    shown = Path(root)
    try:
        real_root = shown.resolve()
        files = find_pages(shown, real_root) if shown.is_dir() else []
    except (OSError, CorpusError):
        return ("unreadable", str(shown))
    signature = []
    for rel in [*files, VOCABULARY_FILE, LLMS_FILE]:
        try:
            st = os.stat(shown / rel)
        except OSError:
            continue
        signature.append((rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(signature)


def _page_id(rel: str) -> str:
    stem = rel.rsplit(".", 1)[0]
    if stem == "index":
        return "index"
    return stem.removesuffix("/index")


def _root_file(shown: Path, name: str, real_root: Path) -> bool:
    """Tell whether the optional file ``name`` sits at the root; refuse a link leading out.

    Anything by that name counts, not only a regular file: a named pipe or a folder
    called ``vocabulary.json`` is refused when read, rather than silently ignored.
    """
    path = shown / name
    if not os.path.lexists(path):
        return False
    real = path.resolve()
    if real.parent != real_root and real_root not in real.parents:
        raise CorpusError(
            f"symbolic link points outside the docs folder, to {real}",
            path=path,
            hint="copy the target into the docs folder or remove the link",
        )
    return True


def _read_text(path: Path, name: str, digest: Any) -> str:
    """Read a file as UTF-8 and add its name and bytes to the fingerprint.

    A page that is a named pipe, a device or larger than ``DOCS_FILE`` allows is
    refused, naming the file, instead of hanging or filling the memory.
    """
    data = read_bytes(path, DOCS_FILE, error=CorpusError, missing="check that the file exists and is readable")
    # Lengths keep ("ab", "c") and ("a", "bc") from hashing alike.
    digest.update(f"{len(name)}:{name}:{len(data)}:".encode())
    digest.update(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorpusError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start}",
            path=path,
            line=line,
            hint=f"re-save the file as UTF-8, for example: iconv -f latin1 -t utf-8 {path}",
        ) from None


def _build_page(page_id: str, rel: str, parsed: ParsedPage, listed: str | None) -> Page:
    title = page_title(page_id, parsed)
    description = parsed.description or listed
    sections: list[Section] = []
    chain: list[tuple[int, str]] = []
    for raw in parsed.sections:
        if raw.level:
            while chain and chain[-1][0] >= raw.level:
                chain.pop()
            chain.append((raw.level, raw.title))
        heading_path = [title] + [heading for _, heading in chain]
        # An H1 that repeats the page title adds nothing to the path.
        if len(heading_path) > 1 and heading_path[1] == title:
            del heading_path[1]
        sections.append(
            Section(
                id=f"{page_id}#{raw.anchor}",
                page_id=page_id,
                anchor=raw.anchor,
                title=raw.title,
                heading_path=tuple(heading_path),
                level=raw.level,
                text=raw.text,
                links=raw.links,
            )
        )
    return Page(
        id=page_id,
        path=rel,
        title=title,
        description=description,
        keywords=parsed.keywords,
        sections=tuple(sections),
        dropped=parsed.dropped,
    )
