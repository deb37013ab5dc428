"""What a docs folder's cross-references can name: its pages, their sections and MyST labels.

Hugo ``relref``, MyST ``{ref}``/``{doc}`` and Jekyll ``{% link %}`` name pages of the
folder; once every page has been read, ``FolderTargets`` turns each into the page or
section id it names and the title a reader sees for it (``docpilot.corpus.generators``
asks it while a page that holds cross-references is read again).
"""

from __future__ import annotations

import posixpath

from docpilot.corpus.markdown import ParsedPage, slugify


def page_title(page_id: str, parsed: ParsedPage) -> str:
    """A page's title: front matter, else the first level-1 heading, else the last part of its id."""
    return (parsed.title or next((s.title for s in parsed.sections if s.level == 1 and s.title), None)
            or page_id.rsplit("/", 1)[-1])


class FolderTargets:
    """What the folder's cross-references can name: its pages, their sections and MyST labels.

    A path (Hugo ``relref``, MyST ``{doc}``, Jekyll ``{% link %}``) is read as the
    generators read it: relative to the page's folder first, then from the docs root,
    then as the end of a page id (Hugo finds ``relref "env"`` by its name alone); its
    extension and an ``index``/``_index`` name drop as page ids drop them. A
    ``#anchor`` that names no section leaves the page's id. A label (MyST ``{ref}``)
    is a ``(label)=`` target, else an anchor of the page, else of any page.
    """

    def __init__(self, pages: list[tuple[str, ParsedPage]]) -> None:
        self.titles: dict[str, str] = {}
        self.labels: dict[str, str] = {}
        self.anchors: dict[str, str] = {}
        for page_id, parsed in pages:
            self.titles[page_id] = page_title(page_id, parsed)
            for raw in parsed.sections:
                section_id = f"{page_id}#{raw.anchor}"
                if raw.level:
                    self.titles[section_id] = raw.title
                    self.anchors.setdefault(raw.anchor, section_id)
                for label in raw.labels:
                    self.labels.setdefault(label, section_id)

    def resolve(self, kind: str, target: str, page_id: str) -> str | None:
        if kind == "label":
            return self.labels.get(target) or self._section(page_id, slugify(target)) or self.anchors.get(target)
        path, _, anchor = target.strip().partition("#")
        path = path.split("?", 1)[0]
        page = self._page(path, page_id) if path else page_id
        if page is None:
            return None
        return (self._section(page, anchor) if anchor else None) or page

    def title(self, target_id: str) -> str | None:
        return self.titles.get(target_id)

    def _section(self, page_id: str, anchor: str) -> str | None:
        section_id = f"{page_id}#{anchor}"
        return section_id if section_id in self.titles else None

    def _page(self, path: str, page_id: str) -> str | None:
        stem = path.rstrip("/")
        for suffix in (".md", ".mdx", ".html", ".rst"):
            stem = stem.removesuffix(suffix)
        folder = posixpath.dirname(page_id) if page_id in self.titles else ""
        candidates = [stem.lstrip("/")] if stem.startswith("/") else [posixpath.join(folder, stem), stem]
        for candidate in candidates:
            parts = [part for part in posixpath.normpath(candidate).split("/") if part not in ("", ".")]
            named = ["/".join(parts)]
            if parts and parts[-1] in ("index", "_index"):
                named.insert(0, "/".join(parts[:-1]) or "index")
            for found in named:
                if found in self.titles and "#" not in found:
                    return found
        tail = "/" + stem.strip("/")
        ends = [known for known in self.titles if "#" not in known and ("/" + known).endswith(tail)]
        return ends[0] if len(ends) == 1 else None
