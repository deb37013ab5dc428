"""The manual and the code's docstrings and comments name only what exists.

Links and anchors, source files, modules and their names, benchmarks, and the options a
``docpilot`` command or a benchmark is shown with, wherever they are named: in ``docs/``
and README.md, and in every line of the code. The docs are also the demo corpus, so
their anchors are read by DocPilot's own loader, as a reader's browser finds them. A
page or a docstring that links a section renamed since, a module moved to another
package, a function renamed, or an option dropped from a command fails here, in the fast tier.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from docpilot.cli import main
from docpilot.corpus.pages import load_corpus

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
PACKAGES = {"docpilot", "metrics", "tasks", "flows"}
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PATH = re.compile(r"(?<![\w/.-])((?:docpilot|metrics|tasks|flows|benchmarks|tests)/[\w/.-]+\.py)\b")
_DOTTED = re.compile(r"\bdocpilot(?:\.[a-z_][a-z0-9_]*)+")
_SPAN = re.compile(r"`([^`\n]+)`")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")


def _lines() -> Iterator[tuple[Path, int, str]]:
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            yield page, n, line


def _where(page: Path, n: int) -> str:
    return f"{page.relative_to(ROOT)}:{n}"


def test_every_link_names_a_page_and_a_section_that_exist():
    corpus = load_corpus(DOCS)
    anchors = {page.path: {s.anchor for s in page.sections} for page in corpus.pages.values()}
    broken = []
    for page, n, line in _lines():
        for target in _LINK.findall(line):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page.resolve()
            if not dest.exists():
                broken.append(f"{_where(page, n)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and dest.is_relative_to(DOCS.resolve()):
                if anchor not in anchors.get(dest.relative_to(DOCS.resolve()).as_posix(), set()):
                    broken.append(f"{_where(page, n)}: {target} (no such section)")
    assert not broken, "\n".join(broken)


def test_every_source_file_the_docs_name_exists():
    missing = [f"{_where(page, n)}: {path}" for page, n, line in _lines() for path in _PATH.findall(line)
               if not (ROOT / path).exists() and not (DOCS / path).exists()]  # a page of the docs by its path
    assert not missing, "\n".join(missing)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def _is_module_path(dotted: str) -> bool:
    """A dotted name that reaches into a package of the project (``docpilot.run.job``), not a span attribute."""
    parts = dotted.split(".")
    return len(parts) > 1 and (ROOT / "docpilot" / parts[1]).is_dir() or (
        len(parts) > 1 and parts[1] in PACKAGES and (ROOT / parts[1]).is_dir())


def test_every_module_and_name_the_docs_name_exists():
    unknown = [f"{_where(page, n)}: {dotted}" for page, n, line in _lines() for dotted in _DOTTED.findall(line)
               if _is_module_path(dotted) and not _resolves(dotted.rstrip("."))]
    assert not unknown, "\n".join(unknown)


def _options() -> set[str]:
    ctx = click.Context(main)
    known = {"--help"}

    def walk(command: click.Command) -> None:
        for param in command.params:
            known.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name))

    walk(main)
    return known


def _docpilot_commands(line: str) -> Iterator[str]:
    """The `docpilot ...` commands a line shows: in code spans, or the line itself inside a code block."""
    for span in [*_SPAN.findall(line), line.strip().removeprefix("$ ")]:
        span = span.strip()
        for prefix in (".venv/bin/docpilot ", "docpilot "):
            if span.startswith(prefix):
                yield span
                break


def test_every_option_a_docpilot_command_is_shown_with_exists():
    known = _options()
    unknown = sorted({f"{_where(page, n)}: {option}" for page, n, line in _lines()
                      for command in _docpilot_commands(line) for option in _OPTION.findall(command)
                      if option not in known})
    assert not unknown, "\n".join(unknown)


@pytest.mark.parametrize("dotted", ["docpilot.targets.ask.ask_target", "docpilot.metrics.retrieval.as_read"])
def test_the_name_check_finds_what_exists(dotted):
    assert _is_module_path(dotted) and _resolves(dotted)
    assert not _resolves(dotted + "_gone")


_SOURCES = [p for folder in ("docpilot", "metrics", "tasks", "flows") for p in sorted((ROOT / folder).rglob("*.py"))]
_QUOTED = re.compile(r"``([a-z_][a-z0-9_]*(?:\.[a-z_][A-Za-z0-9_]*)+)``")


def _config_keys() -> set[str]:
    """Every dotted setting of the configuration (``retrieval.embedder``, ``corpus.base_url``)."""
    from pydantic import BaseModel

    from docpilot.config.model import Config

    keys: set[str] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            keys.add(prefix + name)
            kind = info.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                walk(kind, f"{prefix}{name}.")

    walk(Config, "")
    return keys


def _source_names() -> Iterator[tuple[list[str], str]]:
    """Every ``package.module.name`` a docstring or comment of the code quotes, with where: the full names it
    may stand for (from the docpilot namespace, or from the quoting module's own package)."""
    subpackages = {p.name for p in (ROOT / "docpilot").iterdir() if p.is_dir()} | (PACKAGES - {"docpilot"})
    settings = _config_keys()
    for path in _SOURCES:
        parts = path.relative_to(ROOT).parts
        own = f"docpilot.{parts[0]}" if parts[0] != "docpilot" else ".".join(parts[:2]) if len(parts) > 2 else "docpilot"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for quoted in _QUOTED.findall(line):
                head = quoted.split(".", 1)[0]
                if quoted.removeprefix("config.") in settings or quoted.endswith((".json", ".txt", ".yaml", ".md")):
                    continue
                if head == "docpilot" and _is_module_path(quoted):
                    yield [quoted], f"{path.relative_to(ROOT)}:{n}"
                elif head in subpackages:
                    yield [f"docpilot.{quoted}", f"{own}.{quoted}"], f"{path.relative_to(ROOT)}:{n}"


def test_every_module_and_name_the_code_s_docstrings_quote_exists():
    unknown = sorted({f"{where}: {names[0]}" for names, where in _source_names()
                      if not any(_resolves(name) for name in names)})
    assert not unknown, "\n".join(unknown)


def _source_lines() -> Iterator[tuple[str, str]]:
    """Every line of the code (docstrings and comments among them), with where it is."""
    for path in _SOURCES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            yield f"{path.relative_to(ROOT)}:{n}", line


_DOCS_LINK = re.compile(r"(?<![\w/.-])docs/((?:[\w-]+/)*[\w.-]+\.md)(?:#([\w-]+))?")


def test_every_page_and_section_of_the_docs_the_code_names_exists():
    corpus = load_corpus(DOCS)
    anchors = {page.path: {s.anchor for s in page.sections} for page in corpus.pages.values()}
    broken = [f"{where}: docs/{page}" + (f"#{anchor}" if anchor else "") for where, line in _source_lines()
              for page, anchor in _DOCS_LINK.findall(line)
              if not (DOCS / page).is_file() or (anchor and anchor not in anchors.get(page, set()))]
    assert not broken, "\n".join(broken)


def test_every_source_file_the_code_names_exists():
    missing = [f"{where}: {path}" for where, line in _source_lines() for path in _PATH.findall(line)
               if not (ROOT / path).exists()]
    assert not missing, "\n".join(missing)


def test_every_module_the_code_names_unquoted_exists():
    """``docpilot.run.road`` in plain words, as a comment may name it (quoted names are checked above)."""
    unknown = [f"{where}: {dotted}" for where, line in _source_lines() for dotted in _DOTTED.findall(line)
               if _is_module_path(dotted) and not _resolves(dotted.rstrip("."))]
    assert not unknown, "\n".join(unknown)


def test_every_option_a_docpilot_command_is_shown_with_in_the_code_exists():
    """A ``docpilot …`` command quoted anywhere in the code, and every option a CLI module names
    (its docstrings and help texts belong to DocPilot's own commands)."""
    known = _options()
    unknown = set()
    for where, line in _source_lines():
        named = [o for command in _docpilot_commands(line) for o in _OPTION.findall(command)]
        if where.startswith("docpilot/cli/"):
            named += _OPTION.findall(line)
        unknown.update(f"{where}: {option}" for option in named if option not in known)
    assert not unknown, "\n".join(sorted(unknown))


_BENCHMARK = re.compile(r"(?<![\w.])benchmarks\.([a-z_][a-z0-9_]*)((?:\s+(?:--[a-z][a-z0-9-]*|[\w./=-]+))*)")
_ARGUMENT = re.compile(r"""add_argument\(\s*["'](--[a-z][a-z0-9-]*)""")


def _benchmark_runs() -> Iterator[tuple[str, str, str]]:
    """Every ``benchmarks.NAME`` (as ``python -m`` runs it) in the docs and the code, with the words after it."""
    for page, n, line in _lines():
        for name, rest in _BENCHMARK.findall(line):
            yield _where(page, n), name, rest
    for where, line in _source_lines():
        for name, rest in _BENCHMARK.findall(line):
            yield where, name, rest


def test_every_benchmark_and_option_named_exists():
    """``python -m benchmarks.server_load --retriever hybrid``: the module, and the options it is shown with."""
    options: dict[str, set[str] | None] = {}
    unknown = []
    for where, name, rest in _benchmark_runs():
        if name not in options:
            path = ROOT / "benchmarks" / f"{name}.py"
            options[name] = set(_ARGUMENT.findall(path.read_text(encoding="utf-8"))) | {"--help"} if path.is_file() else None
        if options[name] is None:
            unknown.append(f"{where}: benchmarks.{name} (no such benchmark)")
            continue
        unknown += [f"{where}: benchmarks.{name} {option}" for option in _OPTION.findall(rest)
                    if option not in options[name]]
    assert not unknown, "\n".join(unknown)


@pytest.mark.parametrize(("line", "found"), [
    ("see docs/targets.md#thread, and docs/metrics/latency.md", [("targets.md", "thread"), ("metrics/latency.md", "")]),
    ("a user's my-docs/intro.md is not the manual", []),
])
def test_the_docs_link_check_reads_pages_and_sections(line, found):
    assert _DOCS_LINK.findall(line) == found


def test_the_benchmark_check_reads_the_module_and_its_options():
    line = "(``python -m benchmarks.server_load --retriever hybrid --seconds 8``) and benchmarks/harness.py"
    assert [(name, _OPTION.findall(rest)) for name, rest in _BENCHMARK.findall(line)] == [
        ("server_load", ["--retriever", "--seconds"])]
    assert "--retriever" in _ARGUMENT.findall((ROOT / "benchmarks" / "server_load.py").read_text(encoding="utf-8"))


_QUOTED_NAME = re.compile(r"``([a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9])``")
_EXAMPLES = {"tok_examples", "stage_embed_p95"}  # quoted as examples of a user's names, not the code's


def _code_names() -> set[str]:
    """Every name the code uses, and every word of its short strings (config keys, JSON fields, options)."""
    import io
    import tokenize

    names: set[str] = set()
    for path in [*_SOURCES, *sorted((ROOT / "benchmarks").glob("*.py"))]:
        for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
            if token.type == tokenize.NAME:
                names.add(token.string)
            elif token.type == tokenize.STRING and "``" not in token.string and len(token.string) < 200:
                names.update(re.findall(r"[A-Za-z_]\w*", token.string))
    return names


def test_every_snake_case_name_the_code_s_docstrings_quote_is_used_somewhere():
    """``lookup_turns``, ``near_evidence``: a function, field or setting renamed since is caught where it is quoted."""
    names = _code_names()
    unknown = sorted({f"{where}: {name}" for where, line in _source_lines() for name in _QUOTED_NAME.findall(line)
                      if name not in names and name not in _EXAMPLES})
    assert not unknown, "\n".join(unknown)
