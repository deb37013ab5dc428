"""Which files under a docs folder are its pages: each file and folder once, within a budget.

Links could otherwise multiply a folder: sixteen levels of symbolic links to links
once made 98,303 pages of one file, and a hard link could bring a file from anywhere
on the disk (``/etc/passwd``) into the index.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from docpilot.userfiles.intake import DOCS_FILE, not_regular
from docpilot.errors import CorpusError

PAGE_SUFFIXES = (".md", ".mdx")
"""File name endings of pages."""
MAX_PAGES = 50_000
"""Most pages a docs folder may hold; more is refused (the largest real doc sets hold about a thousand)."""
MAX_DOCS_BYTES = 512 * 1024 * 1024
"""Most bytes of pages a docs folder may hold; more is refused."""


def find_pages(shown: Path, real_root: Path) -> list[str]:
    """Relative posix paths of every page under the root, sorted; hidden files and folders skipped.

    Each file and folder is read once however many links lead to it: the real tree
    first, so a file keeps its own path's id, then what symbolic links add. A hard link
    with a name outside the folder is refused like a symbolic link out of it, a page that
    is no regular file (a named pipe, a device) is refused, and ``MAX_PAGES`` and
    ``MAX_DOCS_BYTES`` bound the rest.
    """
    found: list[str] = []
    root_text = str(real_root)
    walked: set[str] = {root_text}
    files: dict[tuple[int, int], tuple[str, int, int]] = {}  # (dev, inode) -> (rel, links named here, nlink)
    links: list[tuple[os.DirEntry, str]] = []
    total = 0

    def _inside(real: str) -> bool:
        return real == root_text or real.startswith(root_text.rstrip(os.sep) + os.sep)

    def _add(rel: str, info: os.stat_result, *, hard_link: bool) -> None:
        nonlocal total
        key = (info.st_dev, info.st_ino)
        if key in files:
            first, named, nlink = files[key]
            files[key] = (first, named + hard_link, nlink)
            return  # the same file under a second name: indexed once
        files[key] = (rel, int(hard_link), info.st_nlink)
        found.append(rel)
        total += info.st_size
        if len(found) > MAX_PAGES or total > MAX_DOCS_BYTES:
            raise CorpusError(
                f"the docs folder holds more than {MAX_PAGES:,} pages or {MAX_DOCS_BYTES // 2**20} MiB of them",
                path=shown,
                hint="point corpus.docs at the folder of the docs themselves, not a parent holding other trees",
            )

    def _walk(folder: Path, rel: str) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as exc:
            raise CorpusError(
                f"cannot list the folder: {exc.strerror or exc}",
                path=folder,
                hint="check the folder's permissions",
            ) from None
        for entry in entries:
            if entry.name.startswith("."):
                continue
            entry_rel = f"{rel}{entry.name}"
            if entry.is_symlink():
                links.append((entry, entry_rel))  # after the real tree, so real paths keep their ids
            elif entry.is_dir(follow_symlinks=False):
                walked.add(os.path.realpath(entry.path))
                _walk(Path(entry.path), entry_rel + "/")
            elif entry.name.endswith(PAGE_SUFFIXES):
                info = entry.stat(follow_symlinks=False)
                _refuse_special(shown / entry_rel, info)
                _add(entry_rel, info, hard_link=True)

    _walk(shown, "")
    while links:
        entry, entry_rel = links.pop(0)
        real = os.path.realpath(entry.path)
        is_page = entry.name.endswith(PAGE_SUFFIXES)
        if not (is_page or os.path.isdir(real)):
            continue
        if not _inside(real):
            raise CorpusError(
                f"symbolic link points outside the docs folder, to {real}",
                path=shown / entry_rel,
                hint="copy the target into the docs folder or remove the link",
            )
        if os.path.isdir(real):
            if real not in walked:  # a folder already read (or an ancestor: a loop) is not read again
                walked.add(real)
                _walk(Path(entry.path), entry_rel + "/")
        elif os.path.lexists(real):
            info = os.stat(real)
            _refuse_special(shown / entry_rel, info)
            _add(entry_rel, info, hard_link=False)
    for rel, named, nlink in files.values():
        if nlink > max(named, 1):  # a page read through a symbolic link names itself nowhere here
            raise CorpusError(
                f"the page is a hard link with {nlink} names, {nlink - max(named, 1)} of them outside the docs folder",
                path=shown / rel,
                hint="copy the file into the docs folder instead of linking it (cp, not ln)",
            )
    return sorted(found)


def _refuse_special(path: Path, info: os.stat_result) -> None:
    """Refuse a page that is no regular file: a named pipe would hang the read, a device never end it."""
    if not stat.S_ISREG(info.st_mode):
        raise not_regular(path, info.st_mode, DOCS_FILE, CorpusError)
