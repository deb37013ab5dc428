"""A docs folder that misses every gold page: one problem naming the folder the pages are likely in.

Page ids are paths under the docs folder, so pointing ``--docs`` one folder too deep
(``docs/guide``) or too shallow (the repository root) breaks every gold entry at
once. One error per record hides the one fix; this finds it instead, by looking for
the gold pages' files in the folders above and below the one given.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from docpilot.userfiles.userfile import Problem

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus
    from docpilot.schema import GoldenRecord

ABOVE = 3
"""Folders above the given one that are tried."""
BELOW = 3
"""Levels of folders below the given one that are tried."""
MOST_FOLDERS = 2000
"""Folders looked at, at most: a docs folder given as a home directory must not walk the disk."""
_SKIPPED = {"node_modules", "__pycache__", "site-packages", "venv"}


def misplaced_docs(records: Sequence[GoldenRecord], corpus: Corpus, path: Path | None = None) -> Problem | None:
    """One problem when no gold entry's page is in ``corpus`` and the entries are more than one, or a
    folder nearby holds their pages; None otherwise (the usual per-entry problems then apply)."""
    entries = [entry for record in records for entry in record.gold]
    pages = sorted({entry.partition("#")[0] for entry in entries})
    # A page that is there, even with every anchor wrong, says the folder is right.
    if not pages or any(corpus.has_entry(page) for page in pages):
        return None
    likely, found = _likely_folder(corpus.root, pages)
    if likely is None and len(entries) < 2:
        return None
    shown = ", ".join(pages[:3]) + (", …" if len(pages) > 3 else "")
    message = (f"no gold entry names a page of the docs folder {_short(corpus.root)} ({len(corpus.pages)} pages): "
               f"none of the {len(pages)} gold pages ({shown}) is there")
    if likely is not None:
        hint = (f"the gold pages are in {_short(likely)} ({found} of {len(pages)} found there): "
                f"pass --docs {_short(likely)}, or set corpus.docs to it in the config")
    else:
        hint = ("point --docs (or corpus.docs) at the folder the gold page ids start from; "
                "`docpilot golden sections --docs FOLDER` lists the page ids of a folder")
    return Problem(message, hint, path)


def _likely_folder(root: Path, pages: list[str]) -> tuple[Path | None, int]:
    """The folder near ``root`` holding the most gold pages, and how many; (None, 0) when none holds any."""
    best: tuple[Path | None, int] = (None, 0)
    for folder in _nearby(root):
        found = sum(_holds(folder, page) for page in pages)
        if found > best[1]:
            best = (folder, found)
    return best


def _nearby(root: Path) -> list[Path]:
    """The folders above ``root`` (nearest first), then those below it, breadth first."""
    folders = list(root.parents)[:ABOVE]
    level = [root]
    for _ in range(BELOW):
        below = []
        for folder in level:
            try:
                children = sorted((entry for entry in os.scandir(folder)
                                   if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                                   and entry.name not in _SKIPPED), key=lambda entry: entry.name)
            except OSError:
                continue
            below += [Path(child.path) for child in children]
        folders += below
        if len(folders) >= MOST_FOLDERS:
            return folders[:MOST_FOLDERS]
        level = below
    return folders


def _holds(folder: Path, page: str) -> bool:
    """Whether ``folder`` has a file (or, for a bare folder entry, a folder) giving the page id ``page``."""
    if not page:
        return False
    candidates = [f"{page}.md", f"{page}.mdx", f"{page}/index.md", f"{page}/index.mdx"]
    return any((folder / name).is_file() for name in candidates) or (folder / page).is_dir()


def _short(folder: Path) -> str:
    """A folder as the user would type it: relative to the working directory when it lies under it."""
    try:
        return os.path.relpath(folder) if Path.cwd() in (folder, *folder.parents) else str(folder)
    except (OSError, ValueError):
        return str(folder)
