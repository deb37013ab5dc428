"""How much longer the docs parser takes per megabyte on pages built to make it slow than on real docs.

Reads every page of a real docs folder (the FastAPI docs: ``docs/en/docs`` of the
FastAPI repository) and times reading them as ``load_corpus`` does — front matter,
sections, markup reduced, chunks cut — as CPU seconds per MB, the best of
``--repeat`` passes. Then times the same for each worst case below: a page of about
``--mb`` MB built by repeating one unit. All are read as MDX, so every rule runs.

Two groups. The *constructs* are each a line or run around a construct on which a
backtracking regex, or a scan restarted at every position, takes time growing with
the square (or worse) of the page's length: the figure is the slowest of them per MB
÷ the real docs per MB (target: at most 3). The *dense pages* are made of lines of a
few bytes (an empty heading on every other line: a section per two bytes); they cost
per line and per section, in time linear in their length but many times a real
page's per MB, since a real page holds a line per 40 bytes and a section per 700.
Their slowest is reported beside the figure. Each case is listed with its ratio, so
a regression names its construct.

    python -m benchmarks.parser_worst_case /path/to/fastapi/docs/en/docs [--mb 1] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docpilot.corpus.chunking import chunk_texts  # noqa: E402
from docpilot.corpus.markdown import parse_page  # noqa: E402

TARGET = 3.0
"""The slowest worst case may take at most this many times the real docs' time per MB."""

WORST_CASES: dict[str, str] = {
    # Headings.
    "attribute list left open, blanks around it": "## Title" + " " * 400 + "{" + " " * 400 + "x\n",
    "attribute list closed, blanks around it": "## Title" + " " * 400 + "{ #id" + " " * 400 + "}\n",
    "hashes and blanks": "#" * 7 + " " * 500 + "x\n## " + "#" * 500 + " \n",
    "setext underline with a tail": "para\n" + "=" * 500 + " x\n",
    # HTML and JSX.
    "script openers, no closer": "<script>\n",
    "style openers, no closer": "<style media=screen>text ",
    "openers with no '>'": "<script ",
    "tag left open, many attributes": "<a" + " b=c" * 300 + "\n",
    "quoted values left open": "<a x=\"<b y='",
    "component with a title, left open": "<Tabs title='a' " + "x " * 300 + "\n",
    "comments on one line": "word <!-- c -->" * 200 + "\n",
    "comment left open": "<!--" + " -" * 300 + "\n",
    # MDX.
    "MDX comments on one line": "word {/* c */}" * 200 + "\n",
    "expressions left open": "{ {x} {",
    "braces and hashes": "{#" * 300 + "\n",
    "import with a long name": "\nimport " + "a" * 1000 + " x\n",
    # Inline Markdown.
    "trailing blanks inside a line": "word" + " " * 1000 + "word \n",
    "backtick runs, none matched": "".join("`" * width + " x " for width in range(1, 60)) + "\n",
    "link left open": "[a](" + "[]" * 300 + "\n",
    "brackets then openers": "[" * 300 + "](" * 300 + "\n",
    "link titles left open": '[a](b "' * 100 + "\n",
    "table row of empty cells": "| a | b |" + " |" * 300 + "\n",
    "emphasis and escapes": "_*\\" * 300 + "\n",
    # Blocks.
    "fence left open": "```python\ncode { <a `x` [y](\n",
    "fence-like openers in prose": "````x`" + " word" * 100 + "\n",
    "blank lines of blanks": " " * 50 + "\n",
    # Admonitions.
    "admonition with a bar and blanks": "/// note | Title" + " " * 1000 + "x\n",
    "admonition with colons and blanks": "::: note Title" + " " * 1000 + "x\n",
    "admonition with colons, blanks, then a brace": ":::" + " " * 500 + "{" + " " * 500 + "x\n",
    "admonition with a quote left open": '!!! note "' + " " * 1000 + '"x\n',
}
"""Each construct's repeated unit, by what it is."""

GENERATOR_CASES: dict[str, str] = {
    "shortcode openers, no closer": "{{< x " + "a " * 20,
    "shortcode openers across lines, no closer": "{{% note\n",
    "shortcodes closed on a later line": "{{< figure\n  src=a.png\n>}}\n",
    "many shortcodes on one line": '[a]({{< relref "p#a" >}}) {{< x >}}' * 50 + "\n",
    "tag openers, no closer": "{% hint " + "b " * 20,
    "expressions left open, closers far below": "{{ x\n" * 10 + "\n}}\n",
    "raw left open": "{% raw %}\n{{ x }}\n",
    "comments left open": "{# " + "c " * 50 + "\n",
    "roles, none closed": "{ref}`a " * 40 + "\n",
    "roles, each closed": "{ref}`the text <label>` " * 40 + "\n",
    "directive fences nested": "````{note}\n:class: x\n```{tip}\ntext\n",
    "colon directives left open": ":::{note} Title\n:opt: v\n",
    "labels without headings": "(label)=\n",
}
"""Static-site generators' constructs (read as .md: MDX pages leave braces to the MDX rules)."""

DENSE_PAGES: dict[str, str] = {
    "empty headings": "#\n",
    "setext headings of one letter": "a\n-\n",
    "lines of one letter": "a\n",
    "fence-like openers as lines": "````x`\n",
    "list items of one letter": "- a\n",
}
"""Each dense page's repeated unit: what costs per line or per section, not per byte."""


def worst_case(name: str, size: int) -> str:
    """The named construct or dense page as a page of at least ``size`` characters."""
    unit = WORST_CASES.get(name) or GENERATOR_CASES.get(name) or DENSE_PAGES[name]
    return "Intro\n\n" + unit * (size // len(unit) + 1)


def read_page(text: str, *, mdx: bool) -> int:
    """Read one page as the corpus loader does; the number of chunks it gives."""
    page = parse_page(text, source="page.mdx" if mdx else "page.md", mdx=mdx)
    return sum(len(chunk_texts(section.text, 220)) for section in page.sections)


def cpu_seconds(pages: list[tuple[str, bool]], repeat: int) -> float:
    """The best of ``repeat`` passes over the pages, in CPU seconds of this process."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for text, mdx in pages:
            read_page(text, mdx=mdx)
        best = min(best, time.process_time() - started)
    return best


def megabytes(pages: list[tuple[str, bool]]) -> float:
    return sum(len(text.encode("utf-8")) for text, _ in pages) / 2**20


def measure(docs: Path, *, mb: float = 1.0, repeat: int = 3) -> dict:
    """Seconds per MB of the real docs and of each worst case, and the worst ratio between them."""
    pages = [(path.read_text(encoding="utf-8"), path.suffix == ".mdx")
             for path in sorted(docs.rglob("*")) if path.suffix in (".md", ".mdx") and path.is_file()]
    if not pages:
        raise SystemExit(f"no .md or .mdx pages under {docs}")
    real = cpu_seconds(pages, repeat) / megabytes(pages)

    def ratios(names, mdx: bool = True) -> dict:
        cases = {}
        for name in names:
            page = [(worst_case(name, int(mb * 2**20)), mdx)]
            per_mb = cpu_seconds(page, repeat) / megabytes(page)
            cases[name] = {"s_per_mb": round(per_mb, 4), "ratio": round(per_mb / real, 2)}
        return cases

    cases, dense = {**ratios(WORST_CASES), **ratios(GENERATOR_CASES, mdx=False)}, ratios(DENSE_PAGES)
    worst = max(cases, key=lambda name: cases[name]["ratio"])
    densest = max(dense, key=lambda name: dense[name]["ratio"])
    return {
        "docs": str(docs), "docs_pages": len(pages), "docs_mb": round(megabytes(pages), 3),
        "docs_s_per_mb": round(real, 4), "case_mb": mb, "repeat": repeat,
        "cases": cases, "worst_case": worst, "worst_ratio": cases[worst]["ratio"], "target": TARGET,
        "dense_pages": dense, "worst_dense_page": densest, "worst_dense_ratio": dense[densest]["ratio"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("docs", type=Path, help="a real docs folder, such as FastAPI's docs/en/docs")
    parser.add_argument("--mb", type=float, default=1.0, help="size of each worst-case page, in MB")
    parser.add_argument("--repeat", type=int, default=3, help="passes, of which the fastest counts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.docs, mb=args.mb, repeat=args.repeat)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"real docs: {result['docs_pages']} pages, {result['docs_mb']} MB, "
          f"{result['docs_s_per_mb']:.3f} CPU s per MB")
    for group, key in (("constructs", "cases"), ("dense pages", "dense_pages")):
        print(f"{group}, per MB ÷ the real docs per MB:")
        for name, case in sorted(result[key].items(), key=lambda item: -item[1]["ratio"]):
            print(f"  {case['ratio']:6.2f} ×  {case['s_per_mb']:.3f} s/MB  {name}")
    verdict = "within" if result["worst_ratio"] <= TARGET else "over"
    print(f"slowest construct ÷ real docs, per MB: {result['worst_ratio']:.2f} ({result['worst_case']}); "
          f"{verdict} the target of {TARGET:g}")
    print(f"slowest dense page ÷ real docs, per MB: {result['worst_dense_ratio']:.2f} "
          f"({result['worst_dense_page']}; linear, per line and per section)")


if __name__ == "__main__":
    main()
