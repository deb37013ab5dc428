"""`docpilot index`: build the search index (or reuse the saved one) and show what it holds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from docpilot.cli import main
from docpilot.cli._errors import handle_errors


@main.command("index")
@click.option("--docs", type=click.Path(file_okay=False), help="Docs folder (overrides corpus.docs).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--rebuild", is_flag=True, help="Build afresh even when a saved index matches.")
@click.option("--json", "as_json", is_flag=True, help="Print what the index holds as JSON.")
@handle_errors
def index_command(docs: str | None, config_path: str | None, rebuild: bool, as_json: bool) -> None:
    """Build the retrieval index for the docs, or reuse the saved one, and print what it holds.

    The index is saved under a fingerprint of the docs and the retrieval settings, so
    `docpilot eval` and `docpilot serve` load it instead of building it again; it is
    rebuilt only when a page or a setting changes. Exit status: 0, or 2 on a config or
    docs error.
    """
    from docpilot import progress
    from docpilot.config.loading import load_config
    from docpilot.corpus.pages import load_corpus
    from docpilot.retrieval.index import folder_size
    from docpilot.retrieval.rankers import Retriever

    config = load_config(config_path, overrides={"corpus": {"docs": docs}} if docs else None)
    corpus = load_corpus(Path(config.corpus.docs), chunk_words=config.corpus.chunk_words)
    start = time.perf_counter()
    with progress.shown():  # on stderr: how far the embedding of a long build is
        retriever = Retriever.open(corpus, config.retrieval, cache_dir=config.cache_dir, rebuild=rebuild)
    seconds = time.perf_counter() - start
    index = retriever.index
    manifest = index.manifest
    facts = {
        "fingerprint": index.fingerprint,
        "path": str(index.path),
        "status": "built" if index.built else "reused",
        "seconds": round(seconds, 3),
        "retriever": manifest.get("retriever"),
        "embedder": manifest.get("embedder"),
        "dim": manifest.get("dim"),
        "pages": manifest.get("pages"),
        "sections": manifest.get("sections"),
        "chunks": manifest.get("chunks"),
        "vocabulary": manifest.get("vocabulary"),
        "reused_vectors": manifest.get("reused_vectors"),
        "size_bytes": folder_size(index.path) if index.path else None,
        "build_seconds": manifest.get("build_seconds"),
        "created_at": manifest.get("created_at"),
        "dropped": {page.id: page.dropped for page in corpus.pages.values() if page.dropped},
    }
    if as_json:
        click.echo(json.dumps(facts, indent=2))
        return
    _show(facts, config.corpus.docs)
    _show_dropped(facts["dropped"])


def _show_dropped(dropped: dict[str, dict[str, int]]) -> None:
    """A line per page that lost template constructs in the reading: how many of each kind."""
    if not dropped:
        return
    console = Console(highlight=False, soft_wrap=True)
    console.print("[bold]dropped while reading[/] (generator syntax with nothing to show: "
                  "includes, macros, unknown shortcodes, cross-references naming no page):")
    for page_id, kinds in dropped.items():
        counts = ", ".join(f"{n} {kind}{'' if n == 1 else 's'}" for kind, n in sorted(kinds.items(), key=_most))
        console.print(f"  {page_id}: dropped {counts}", markup=False)


def _most(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _show(facts: dict, docs: str) -> None:
    console = Console(highlight=False, soft_wrap=True)
    action = "built in" if facts["status"] == "built" else "reused, loaded in"
    console.print(f"[bold]index of {docs}[/]: {action} {facts['seconds']:.2f} s")
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    vectors = (
        f"{facts['chunks']:,} × {facts['dim']} from {facts['embedder']}"
        + (f" ({facts['reused_vectors']:,} reused from an older index)" if facts["reused_vectors"] else "")
        if facts["embedder"]
        else "none"
    )
    rows = [
        ("retriever", facts["retriever"]),
        ("pages", f"{facts['pages']:,}"),
        ("sections", f"{facts['sections']:,}"),
        ("chunks", f"{facts['chunks']:,}"),
        ("vocabulary", f"{facts['vocabulary']:,} terms" if facts["vocabulary"] is not None else "none (no BM25)"),
        ("vectors", vectors),
        ("fingerprint", facts["fingerprint"]),
        ("path", facts["path"]),
        ("size on disk", _size(facts["size_bytes"])),
        ("build time", f"{facts['build_seconds']:.2f} s (built {facts['created_at']})"),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)


def _size(size: int | None) -> str:
    if size is None:
        return "not saved"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size} B"
