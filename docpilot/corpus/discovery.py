"""Which files under a docs folder are its pages: each file and folder once, within a budget.

Links could otherwise multiply a folder: sixteen levels of symbolic links to links can
make nearly a hundred thousand pages of one file, and a hard link could bring a file
from anywhere on the disk (``/etc/passwd``) into the index.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from docpilot.errors import CorpusError
from docpilot.userfiles.intake import DOCS_FILE, not_regular, unopenable

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
    walk = _PageWalk(shown, real_root)
    walk.read_folder(shown, "")
    walk.follow_links()
    walk.refuse_outside_hard_links()
    return sorted(walk.found)


class _PageWalk:
    """One walk of a docs folder: the pages found so far, the folders read, the links still to follow."""

    def __init__(self, shown: Path, real_root: Path) -> None:
        self.shown = shown
        self.root_text = str(real_root)
        self.found: list[str] = []
        self.walked: set[str] = {self.root_text}
        self.files: dict[tuple[int, int], tuple[str, int, int]] = {}  # (dev, inode) -> (rel, links named here, nlink)
        self.links: list[tuple[os.DirEntry, str]] = []
        self.total = 0

    def read_folder(self, folder: Path, rel: str) -> None:
        """Read a folder's pages and subfolders, keeping its symbolic links to follow later."""
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
                self.links.append((entry, entry_rel))  # after the real tree, so real paths keep their ids
            elif entry.is_dir(follow_symlinks=False):
                self.walked.add(os.path.realpath(entry.path))
                self.read_folder(Path(entry.path), entry_rel + "/")
            elif entry.name.endswith(PAGE_SUFFIXES):
                info = entry.stat(follow_symlinks=False)
                _refuse_special(self.shown / entry_rel, info)
                self._add(entry_rel, info, hard_link=True)

    def follow_links(self) -> None:
        """Read what the symbolic links add, in the order they were met (a folder read may add more)."""
        while self.links:
            entry, entry_rel = self.links.pop(0)
            self._follow(entry, entry_rel)

    def refuse_outside_hard_links(self) -> None:
        """Refuse a page with more hard-link names than the walk met inside the folder."""
        for rel, named, nlink in self.files.values():
            if nlink > max(named, 1):  # a page read through a symbolic link names itself nowhere here
                raise CorpusError(
                    f"the page is a hard link with {nlink} names, {nlink - max(named, 1)} of them outside the docs "
                    "folder",
                    path=self.shown / rel,
                    hint="copy the file into the docs folder instead of linking it (cp, not ln)",
                )

    def _follow(self, entry: os.DirEntry, entry_rel: str) -> None:
        """Read the page or folder one symbolic link leads to, if it is inside the docs folder."""
        real = os.path.realpath(entry.path)
        is_page = entry.name.endswith(PAGE_SUFFIXES)
        if not (is_page or os.path.isdir(real)):
            return
        if not self._inside(real):
            raise CorpusError(
                f"symbolic link points outside the docs folder, to {real}",
                path=self.shown / entry_rel,
                hint="copy the target into the docs folder or remove the link",
            )
        if os.path.isdir(real):
            if real not in self.walked:  # a folder already read (or an ancestor: a loop) is not read again
                self.walked.add(real)
                self.read_folder(Path(entry.path), entry_rel + "/")
        elif os.path.lexists(real):
            try:
                info = os.stat(real)
            except OSError as exc:  # a link that leads back to itself (ELOOP), as a golden set's would
                raise unopenable(self.shown / entry_rel, exc, CorpusError) from None
            _refuse_special(self.shown / entry_rel, info)
            self._add(entry_rel, info, hard_link=False)

    def _inside(self, real: str) -> bool:
        """Whether a resolved path is the docs folder or lies under it."""
        return real == self.root_text or real.startswith(self.root_text.rstrip(os.sep) + os.sep)

    def _add(self, rel: str, info: os.stat_result, *, hard_link: bool) -> None:
        """Count a page once per file, and refuse the folder once it holds too many pages or bytes."""
        key = (info.st_dev, info.st_ino)
        if key in self.files:
            first, named, nlink = self.files[key]
            self.files[key] = (first, named + hard_link, nlink)
            return  # the same file under a second name: indexed once
        self.files[key] = (rel, int(hard_link), info.st_nlink)
        self.found.append(rel)
        self.total += info.st_size
        if len(self.found) > MAX_PAGES or self.total > MAX_DOCS_BYTES:
            raise CorpusError(
                f"the docs folder holds more than {MAX_PAGES:,} pages or {MAX_DOCS_BYTES // 2**20} MiB of them",
                path=self.shown,
                hint="point corpus.docs at the folder of the docs themselves, not a parent holding other trees",
            )


def _refuse_special(path: Path, info: os.stat_result) -> None:
    """Refuse a page that is no regular file: a named pipe would hang the read, a device never end it."""
    if not stat.S_ISREG(info.st_mode):
        raise not_regular(path, info.st_mode, DOCS_FILE, CorpusError)
