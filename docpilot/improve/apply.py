"""Writing the chosen vocabulary entries into the docs' ``vocabulary.json``, and nothing else.

The file is merged, never rewritten from scratch: the user's own entries stay as they
were, in their order, and a chosen word the file already has gets the new doc words
after its own. The file is parsed before anything is written, so a malformed one
stops the command with the file untouched; the new text is written atomically
(``docpilot.reports.output``), keeping the file's mode and its indentation.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from docpilot.corpus.sidecar import parse_vocabulary
from docpilot.errors import CorpusError
from docpilot.improve.vocabulary import VocabularyChoice
from docpilot.reports.output import write_atomically

MAX_VOCABULARY_BYTES = 8 * 2**20
"""The largest vocabulary.json read."""

_INDENT = re.compile(r"^\{\s*\n([ \t]+)\S")


class VocabularyChange(BaseModel):
    """One key of ``vocabulary.json`` that applying adds or extends."""

    model_config = ConfigDict(extra="forbid")

    word: str
    """The user's word."""
    added: list[str]
    """The doc words added for it."""
    new: bool
    """Whether the key is new to the file (else it is extended)."""
    reason: str
    """Why the entry was chosen."""


class Applied(BaseModel):
    """What ``docpilot improve --apply`` did to the docs' ``vocabulary.json``."""

    model_config = ConfigDict(extra="forbid")

    path: str
    """The file written (or, with ``--dry-run``, the file that would be)."""
    changes: list[VocabularyChange]
    """The keys added or extended, in the order they were chosen."""
    written: bool
    """Whether the file was written: False on a dry run or when nothing changed."""
    text: str
    """The merged file's text."""


def select(choices: Iterable[VocabularyChoice], causes: Iterable[str] | None) -> list[VocabularyChoice]:
    """The chosen entries that move a record of one of ``causes`` (every entry when None)."""
    wanted = set(causes or ())
    return [c for c in choices if not wanted or wanted & set(c.causes)]


def apply_vocabulary(docs: Path, choices: list[VocabularyChoice], *, dry_run: bool = False) -> Applied:
    """Merge ``choices`` into ``docs/vocabulary.json``; write it atomically unless ``dry_run``.

    Raises ``CorpusError`` (naming the file and line) when the existing file is not a
    valid vocabulary, before anything is written.
    """
    path = docs / "vocabulary.json"
    text, mode = _read(path)
    data: dict[str, object] = json.loads(text) if text is not None else {}
    if text is not None:
        parse_vocabulary(text, path)  # the same checks the retriever applies; raises on a bad file
    changes: list[VocabularyChange] = []
    for choice in choices:
        present = data.get(choice.word)
        mine = [present] if isinstance(present, str) else list(present or [])  # type: ignore[arg-type]
        added = [t for t in choice.targets if t not in mine]
        if not added:
            continue
        data[choice.word] = [*mine, *added]
        changes.append(VocabularyChange(word=choice.word, added=added, new=present is None, reason=choice.reason))
    merged = _dump(data, _indent(text))
    written = bool(changes) and not dry_run
    if written:
        write_atomically(path, merged, "vocabulary file", mode=mode)
    return Applied(path=str(path), changes=changes, written=written, text=merged)


def _read(path: Path) -> tuple[str | None, int | None]:
    """The file's text and mode; (None, None) when there is no file yet."""
    try:
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):  # checked before opening: a pipe would block the open
            kind = "a folder" if stat.S_ISDIR(found.st_mode) else "not a regular file"
            raise CorpusError(f"is {kind}", path=path, hint="make vocabulary.json a JSON file, or point --docs elsewhere")
        if found.st_size > MAX_VOCABULARY_BYTES:
            raise CorpusError(f"is {found.st_size:,} bytes, over the {MAX_VOCABULARY_BYTES:,} a vocabulary may have",
                              path=path, hint="a vocabulary maps words to words: keep it small")
        return path.read_text(encoding="utf-8"), found.st_mode & 0o777
    except FileNotFoundError:
        return None, None
    except UnicodeDecodeError:
        raise CorpusError("is not UTF-8 text", path=path, hint="save vocabulary.json as UTF-8") from None
    except OSError as exc:
        raise CorpusError(f"cannot be read: {exc.strerror or exc}", path=path,
                          hint="check the file's permissions") from None


def _indent(text: str | None) -> str:
    """The indentation the user's file uses; two spaces for a new or one-line file."""
    found = _INDENT.match(text or "")
    return found.group(1) if found else "  "


def _dump(data: dict[str, object], indent: str) -> str:
    """One key a line, each value on the key's line: the layout people write vocabularies in."""
    if not data:
        return "{}\n"
    lines = [f"{indent}{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
             for key, value in data.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"
