"""`docpilot golden check`: validate a golden set (or the attack probes) and show what it covers."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.config.loading import load_config
from docpilot.errors import InputError
from docpilot.golden.gold_state import lock_path
from docpilot.golden.loading import check_golden, load_probes
from docpilot.golden.shape import GoldenShape, describe_golden
from docpilot.metrics.gold import TOP
from docpilot.reports.terminal import clean
from docpilot.schema import AttackProbe
from docpilot.userfiles.userfile import raise_all

_PAGES_SHOWN = 15


@main.group("golden")
def golden() -> None:
    """Check golden sets and attack probes before running them."""


@golden.command("check")
@click.option("--golden", "golden_path", type=click.Path(path_type=Path),
              help="Golden set to check (default: `golden` in the config).")
@click.option("--adversarial", "probes_path", type=click.Path(path_type=Path),
              help="Attack probes to check with --set adversarial (default: `adversarial` in the config).")
@click.option("--docs", type=click.Path(path_type=Path),
              help="Docs folder the gold entries point into (default: `corpus.docs` in the config).")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="Config file (default: configs/docpilot.yaml when present).")
@click.option("--set", "record_set", type=click.Choice(["golden", "adversarial"]), default="golden",
              show_default=True, help="Which file to check.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--target", "target_name", metavar="NAME",
              help="Also send the first positive's question to this target of the config and show how its "
                   "reply maps (docs/targets.md).")
@click.option("--fix", is_flag=True,
              help="Rewrite the gold entries the lock finds moved to their new ids, in place, and lock them.")
@handle_errors
def check(
    golden_path: Path | None,
    probes_path: Path | None,
    docs: Path | None,
    config_path: Path | None,
    record_set: str,
    as_json: bool,
    target_name: str | None = None,
    fix: bool = False,
) -> None:
    """Validate every record, resolve every gold entry against the docs, and print the set's shape.

    Every problem of the file is reported in one pass: errors (the file cannot run)
    together, and warnings (it runs, but a number is weaker for it) apart, on stderr.
    A conversation (a record with turns:) is checked turn by turn, each problem naming
    its turn, and the summary counts its turns beside the single questions.
    With a lock beside the set (golden.lock, written by `docpilot golden lock`), it also
    names each record whose gold moved, changed or is gone since, and each page entry
    whose page gained or lost sections; --fix rewrites the moved ones in place.
    Exit status: 0 when the file is valid, warnings or not; 1 when it is valid but the
    lock finds gold that moved, changed or is gone; 2 when it has an error (the message
    says where and how to fix each).
    """
    overrides = {"golden": _text(golden_path), "adversarial": _text(probes_path), "corpus": {"docs": _text(docs)}}
    config = load_config(config_path, overrides=overrides)
    if record_set == "adversarial":
        _show_probes(config.adversarial, load_probes(config.adversarial), as_json)
        return
    from docpilot.corpus.pages import load_corpus

    corpus = load_corpus(config.corpus.docs, chunk_words=config.corpus.chunk_words)
    fixed = _fix_moved(Path(config.golden), corpus) if fix else None
    checked = check_golden(config.golden, corpus)
    warnings = [f"{w.problem.where()}: {w.problem.message}; fix: {w.problem.hint}" for w in checked.warnings]
    if checked.errors:
        _raise_with_warnings(checked.errors, warnings)
    for warning in warnings:
        click.echo(clean(f"warning: {warning}"), err=True)  # warnings quote ids from the file
    shape = describe_golden(checked.records, corpus).model_copy(update={"record_warnings": warnings})
    from docpilot.reports.detectable import detectable_figures, detectable_lines
    from docpilot.retrieval.bias import BiasMeter

    meter = BiasMeter(corpus, config.retrieval)
    bias = meter.measure_set(checked.records)
    by_turn = _bias_by_turn(meter, checked.records) if shape.conversations else None
    sample = _target_sample(config, target_name, checked.records, corpus) if target_name else None
    findings = _lock_findings(Path(config.golden), checked.records, corpus)
    if as_json:
        locked = None if findings is None else {"path": str(lock_path(config.golden)), "fixed": fixed or {},
                                                "records": [f.as_json() for f in findings if f.state != "ok"]}
        turns = None if by_turn is None else {name: b.model_dump(mode="json", exclude={"records"})
                                              for name, b in by_turn.items()}
        shown = shape.model_copy(update={"bias": bias.model_dump(mode="json"), "bias_by_turn": turns, "lock": locked,
                                         "detectable": detectable_figures(checked.records)}).model_dump(mode="json")
        click.echo(json.dumps({**shown, "target": sample} if sample is not None else shown, indent=2))
    else:
        missing = sum(not corpus.has_entry(entry) for record in checked.records for entry in record.gold)
        _show_shape(config.golden, config.corpus.docs, shape, missing)
        _show_bias(bias, by_turn)
        click.echo("\n".join(detectable_lines(checked.records)))
        if sample is not None:
            _show_sample(target_name, sample)
        if findings is not None:
            _show_findings(lock_path(config.golden), findings, fixed)
    if findings and any(f.stale for f in findings):
        sys.exit(1)


def _target_sample(config, name: str, records: list, corpus) -> dict:
    """One question (the first positive's) sent to the target, and what its reply gave by the mapping."""
    from docpilot.errors import ConfigError
    from docpilot.targets.ask import Endpoint
    from docpilot.targets.check import check_target
    from docpilot.targets.sources import SourceResolver

    if name not in config.targets:
        raise ConfigError(f"--target {name}: the config has no such target",
                          hint=f"the config's targets: {', '.join(config.targets) or 'none; add a targets: section'}")
    return check_target(Endpoint.open(config.targets[name], name, SourceResolver(corpus)), records, corpus)


def _show_sample(name: str, sample: dict) -> None:
    """The sample reply's mapping: each field matched or not, each source and the id it maps to."""
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"target {escape(name)}: {escape(sample['url'])} answered HTTP {sample['status']} to "
                  f"{escape(sample['record'])} in {sample['latency_ms']:.0f} ms "
                  f"(first token {sample['first_token_ms']:.0f} ms); the reply has {escape(str(sample['reply_has']))}")
    if sample["error"]:
        console.print(f"error: {escape(clean(sample['error']))}")
    for field, got in sample["fields"].items():
        if got["path"] is None and field != "answer":
            console.print(f"  {field}: not mapped" + (" (retrieval metrics will be absent)" if field == "sources"
                                                      else " (DocPilot's REFUSE: rule)"))
            continue
        matched = got.get("matched", got.get("refused"))
        detail = {"answer": lambda g: repr(g["value"][:80]), "sources": lambda g: f"{g['count']} sources",
                  "refusal": lambda g: "refused" if g["refused"] else "not refused"}[field](got)
        console.print(f"  {field} ({escape(str(got['path']))}): {'matched' if matched else 'NO MATCH'}, "
                      f"{escape(clean(detail))}")
    table = Table("n", "source", "id", "names", title_justify="left",
                  title=f"sources → ids (gold: {escape(', '.join(sample['gold']))})")
    for s in sample["sources"]:
        table.add_row(str(s["n"]), escape(clean(s["source"])), escape(s["section_id"]),
                      s["names"] if s["in_docs"] else "NOTHING in the docs")
    if sample["sources"]:
        console.print(table)
    if sample["server_timing"]:
        console.print("  Server-Timing: " + ", ".join(f"{k} {v:g} ms" for k, v in sample["server_timing"].items()))
    if sample["server_timing_dropped"]:
        console.print(f"  Server-Timing: {sample['server_timing_dropped']} entries dropped (no usable name, or a "
                      "duration that is not a finite number from 0 to a day)")
    for line in (_granularity_lines(sample["granularity"]) + _marker_lines(sample["markers"])
                 + _conversation_lines(sample["conversation"])):
        console.print(escape(line))


def _granularity_lines(found: dict) -> list[str]:
    """What level the sample's sources name, and how much of the golden set's gold a run can match at it."""
    level, entries = found["level"], found["gold_entries"]
    lines = []
    if found["sources_outside_docs"]:
        lines.append(f"  {found['sources_outside_docs']} sources name nothing in the docs: a run counts them "
                     "(sources_outside_docs) and ranks them where they came, matching no gold")
    if level is None:
        return lines + ["  granularity: unknown (no source of the sample names anything in the docs)"]
    share = f"{found['reachable']} of {entries} gold entries ({found['reachable'] / entries:.0%})" if entries else "none"
    if level == "section":
        return lines + [f"  granularity: sections; a run can match {share} at section level"]
    named = "pages" if level == "page" else f"pages ({found['sources_naming_pages']} of {found['sources_in_docs']})"
    return lines + [
        f"  granularity: {named}; a ranking that names a page is read at page level, where a run can match "
        f"{share}; {found['section_pins']} of them pin a section, credited through its page "
        "(map source_ids.heading, or anchors, to read sections)"]


def _marker_lines(markers: dict) -> list[str]:
    """Whether answers will count as unlinked, and what to do about it."""
    if not markers["unlinked"]:
        return []
    return [f"  the sample answer shows sources but links none ({markers['markers']} markers read from "
            f"{markers['read_from']}): a run counts every such answer in unlinked_answers, which fails its gate; "
            "map reply.citations if the app lists what it cites, or keep the gate as the measure of what "
            "readers see (docs/targets.md#markers)"]


def _conversation_lines(conversation: dict) -> list[str]:
    """How the target's follow-ups will be asked: its conversation mode, and a thread the sample did not name."""
    line = f"  conversation: {conversation['mode']}; {conversation['says']}"
    if conversation["mode"] == "thread":
        found = conversation["thread"]
        line += (f"; the sample reply named thread {found!r} at reply.thread" if found is not None else
                 f"; the sample reply named NO thread at reply.thread {conversation['thread_path']!r}, so a run "
                 "stops at its first reply")
    return [line]


def _fix_moved(golden: Path, corpus) -> dict[str, dict[str, str]]:
    """Rewrite the moved gold entries in place (``--fix``) and say which, on stderr."""
    from docpilot.drafting.locking import fix_moved

    fixed = fix_moved(golden, corpus)
    count = sum(len(moves) for moves in fixed.values())
    click.echo(clean(f"fixed {count} moved gold entr{'y' if count == 1 else 'ies'} in {golden} and its lock"
                     + (":" if fixed else "")), err=True)
    for record_id, moves in fixed.items():
        for old, new in moves.items():
            click.echo(clean(f"  {record_id}: {old} → {new}"), err=True)
    return fixed


def _lock_findings(golden: Path, records: list, corpus) -> list | None:
    """What became of each record's gold since the lock beside the set was written; None without a lock."""
    from docpilot.golden.gold_state import read_lock_beside
    from docpilot.golden.staleness import find_stale

    lock = read_lock_beside(golden)
    return None if lock is None else find_stale(lock, records, corpus)


_NEXT = {
    "moved": "`docpilot golden check --fix` rewrites it to the new id",
    "changed": "read the new text; correct the question or gold answer if they no longer hold, then "
               "`docpilot golden lock {id}`",
    "gone": "pin where the answer is now (`docpilot golden sections --grep WORDS`) or remove the record, then "
            "`docpilot golden lock {id}`",
    "narrowed": "check that the page entry still names where the answer is (add the new page's entry if it "
                "answers too), then `docpilot golden lock {id}`",
    "widened": "check that the page entry is not now too generous, then `docpilot golden lock {id}`",
}


def _show_findings(path: Path, findings: list, fixed: dict | None) -> None:
    """Each record whose gold moved, changed, went or whose page entry widened or narrowed, with what to do."""
    counts = Counter(f.state for f in findings)
    moved_on = [f for f in findings if f.state in _NEXT]
    unlocked = [f.id for f in findings if f.state == "unlocked"]
    summary = ", ".join(f"{state} {counts[state]}" for state in _NEXT if counts[state]) or "none"
    click.echo(clean(f"gold lock {path}: {counts['ok']} of {len(findings)} positives as locked; changed under "
                     f"their gold since: {summary}"))
    for finding in moved_on:
        click.echo(clean(f"  {finding.state:<9} {finding.id}: "
                         + "; ".join(e.describe() for e in finding.entries if e.state != "ok")))
        answer = finding.answer_line() if finding.state != "moved" else None
        if answer:
            click.echo(clean(f"            {answer}"))
        click.echo(clean(f"            next: {_NEXT[finding.state].format(id=finding.id)}"))
    if unlocked:
        more = f" and {len(unlocked) - 10} more" if len(unlocked) > 10 else ""
        click.echo(clean(f"  not locked: {', '.join(unlocked[:10])}{more}: `docpilot golden lock ID...` locks them"))


def _bias_by_turn(meter, records: list) -> dict:
    """The bias figures of first turns (single questions with them) and of follow-ups, apart."""
    return {"first turns": meter.measure_set([r for r in records if (r.turn or 1) == 1]),
            "follow-ups": meter.measure_set([r for r in records if (r.turn or 1) > 1])}


def _show_bias(bias, by_turn: dict | None = None) -> None:
    """The set's bias figures (and, with conversations, per turn) and the positives that borrow most."""
    from docpilot.cli.drafts import bias_line

    console = Console(highlight=False, soft_wrap=True)
    console.print("question bias (how much each question borrows from its gold section; users' questions borrow "
                  f"less): {escape(bias_line(bias))}")
    for name, figures in (by_turn or {}).items():
        console.print(f"  {name}: {escape(bias_line(figures))}")
    borrowed = sorted((r for r in bias.records if r.overlap is not None), key=lambda r: (-r.overlap, r.id))
    if not borrowed:
        return
    table = Table("record", "overlap", "heading", "leakage", "BM25 rank", title_justify="left",
                  title=f"most borrowed ({min(len(borrowed), _PAGES_SHOWN)} of {len(borrowed)}; --json lists all)")
    for r in borrowed[:_PAGES_SHOWN]:
        table.add_row(escape(clean(r.id)), *(f"{v:.2f}" if v is not None else "-" for v in (r.overlap, r.heading,
                      r.leakage)), str(r.bm25_rank) if r.bm25_rank else f"> {100}")
    console.print(table)


@golden.command("sections")
@click.argument("page", required=False)
@click.option("--grep", metavar="WORDS",
              help="Only sections whose heading path or text holds all these words (any case).")
@click.option("--docs", type=click.Path(path_type=Path),
              help="Docs folder to list (default: `corpus.docs` in the config).")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="Config file (default: configs/docpilot.yaml when present).")
@click.option("--json", "as_json", is_flag=True, help="Print the pages and sections as JSON.")
@handle_errors
def sections(page: str | None, grep: str | None, docs: Path | None, config_path: Path | None, as_json: bool) -> None:
    """List the page and section ids a gold entry can name, with each heading path and its first words.

    PAGE narrows the list to a page, a folder, or the start of a page id. A page id as
    a gold entry matches every section of the page, `page#anchor` one section, and
    `page#(top)` the text above the page's first heading. A section's heading path
    (`cli › show › Options`) tells apart sections with the same heading. The table
    keeps to the terminal's width: a long id wraps rather than crowd out the rest.
    Exit status: 0; 1 when --grep matches no section; 2 when the docs cannot be read
    or PAGE names nothing.
    """
    from docpilot.corpus.pages import load_corpus

    config = load_config(config_path, overrides={"corpus": {"docs": _text(docs)}})
    corpus = load_corpus(config.corpus.docs, chunk_words=config.corpus.chunk_words)
    pages = _outline_with_paths(corpus, page, grep)
    if grep and not pages:
        click.echo(clean(f"no section{' under ' + page if page else ''} mentions all of: {grep}; "
                         "try fewer words, or a word as the page writes it"), err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(pages, indent=2, ensure_ascii=False))
    else:
        _show_outline(pages, f"{config.corpus.docs}" + (f" under {page}" if page else ""))


PATH_SEPARATOR = " › "
"""Between the headings of a section's heading path, as the table shows it."""


def _outline_with_paths(corpus, page: str | None, grep: str | None) -> list[dict]:
    """The outline's pages as dicts, each section with its heading ``path``; ``grep`` matches the path too.

    A section the outline matches by its heading or text keeps the words around the
    match; one matched only with its parents' headings shows its first words.
    """
    import dataclasses

    from docpilot.corpus.outline import outline

    every = outline(corpus, page)
    matched = {s.id: s for p in outline(corpus, page, grep) for s in p.sections} if grep else {}
    words = grep.lower().split() if grep else []
    found = []
    for entry in every:
        lines = []
        for line in entry.sections:
            section = corpus.sections.get(line.id.removesuffix(TOP))
            path = list(section.heading_path) if section is not None and line.level else [entry.title]
            if words and line.id not in matched:
                haystack = " ".join([*path, section.text if section is not None else ""]).lower()
                if not all(word in haystack for word in words):
                    continue
            lines.append({**dataclasses.asdict(matched.get(line.id, line)), "path": path})
        if lines or not words:
            found.append({**dataclasses.asdict(entry), "sections": lines})
    return found


def _show_outline(pages: list[dict], where: str) -> None:
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, soft_wrap=True, width=160)  # a file or a pipe: no cause to wrap at 80
    count = sum(len(p["sections"]) for p in pages)
    table = Table(title=f"{where}: {_count(len(pages), 'page')}, {_count(count, 'section')}", title_justify="left",
                  expand=True)
    # An id is copied whole into a golden set: past a third of the width it wraps, never elided.
    longest = max((len(s["id"]) for p in pages for s in p["sections"]), default=10)
    table.add_column("id", overflow="fold", max_width=max(24, console.width // 3), min_width=min(longest, 24))
    table.add_column("heading path", ratio=2, min_width=14)
    table.add_column("first words", ratio=3, min_width=20)
    for page in pages:
        table.add_row(f"[bold]{escape(clean(page['id']))}[/]", f"[bold]{escape(clean(page['title']))}[/]",
                      f"[dim]{escape(page['path'])}, {_count(len(page['sections']), 'section')}[/]")
        for section in page["sections"]:
            # The page's title heads the page's row; below it a path starts at the page's own headings.
            path = section["path"][1:] if len(section["path"]) > 1 else section["path"]
            heading = section["heading"] if not section["level"] else PATH_SEPARATOR.join(path)
            table.add_row(escape(clean(section["id"])), escape(clean(heading)), escape(clean(section["words"])))
    console.print(table)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _raise_with_warnings(errors: list, warnings: list[str]) -> None:
    """One error listing every error, then the warnings apart, so one check shows all there is to fix."""
    try:
        raise_all(errors)
    except InputError as exc:
        if not warnings:
            raise
        tail = [f"and {len(warnings)} warning(s), which do not stop a run:", *(f"  {w}" for w in warnings)]
        raise InputError("\n".join([str(exc), *tail])) from None


def _show_shape(path: str, docs: str, shape: GoldenShape, missing: int = 0) -> None:
    console = Console(highlight=False, soft_wrap=True)
    found = (f"{missing} gold entr{'y names' if missing == 1 else 'ies name'} nothing in {docs}, stale by the "
             "lock (below)" if missing else f"every gold entry found in {docs}")
    chats = (f" ({_count(shape.records - shape.turns, 'single question')} and {_count(shape.conversations, 'conversation')} "
             f"of {_count(shape.turns, 'turn')}, each turn a record)" if shape.conversations else "")
    console.print(f"[bold]{path}[/]: {shape.records} records{escape(chats)}, {found} ({shape.pages} pages)")
    splits = Table("split", "positives", "negatives", "records", title="records per split", title_justify="left")
    for name, split in shape.splits.items():
        splits.add_row(name, str(split.positives), str(split.negatives), str(split.positives + split.negatives))
    console.print(splits)
    console.print("gold entries by form: " + ", ".join(f"{form} {count}" for form, count in shape.gold_forms.items()))
    pages = Table("page", "records", title=f"records per page ({len(shape.records_per_page)} pages touched)",
                  title_justify="left")
    for page, count in list(shape.records_per_page.items())[:_PAGES_SHOWN]:
        pages.add_row(page, str(count))
    console.print(pages)
    for warning in shape.warnings:
        console.print(f"[yellow]warning[/]: {escape(clean(warning))}")
    if shape.record_warnings:
        console.print(f"{len(shape.record_warnings)} record warning(s), listed above on stderr")


def _show_probes(path: str, probes: list[AttackProbe], as_json: bool) -> None:
    by_expect = Counter(probe.expect for probe in probes)
    by_split = Counter(probe.split for probe in probes)
    if as_json:
        click.echo(json.dumps({"probes": len(probes), "expect": dict(by_expect), "splits": dict(by_split)}, indent=2))
        return
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"[bold]{path}[/]: {len(probes)} attack probes")
    table = Table("expect", "probes", title="probes by expected outcome", title_justify="left")
    for expect, count in sorted(by_expect.items()):
        table.add_row(expect, str(count))
    console.print(table)
    console.print("by split: " + ", ".join(f"{split} {count}" for split, count in sorted(by_split.items())))


def _text(path: Path | None) -> str | None:
    return str(path) if path is not None else None


@golden.command("lock")
@click.argument("ids", nargs=-1)
@click.option("--golden", "golden_path", type=click.Path(path_type=Path),
              help="Golden set to lock (default: `golden` in the config).")
@click.option("--docs", type=click.Path(path_type=Path),
              help="Docs folder the gold entries point into (default: `corpus.docs` in the config).")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="Config file (default: configs/docpilot.yaml when present).")
@handle_errors
def lock(ids: tuple[str, ...], golden_path: Path | None, docs: Path | None, config_path: Path | None) -> None:
    """Write golden.lock beside the golden set: what the docs hold under each record's gold now.

    For every gold entry it keeps the digest of the text the entry covers and its
    heading path, and for every record with a gold answer whether its identifiers and
    words are in that text; `docpilot golden check` then names each record whose gold
    moved, changed or went since. Commit it beside the set. IDS lock only those records
    again (after reading them against the docs); every other record keeps its lock. A
    conversation's id locks each of its turns, `<id>/<turn>` one turn.
    Exit status: 0; 2 when a gold entry names nothing in the docs, an id names no
    record, or a file has an error (nothing is written then).
    """
    import time

    from docpilot.corpus.pages import load_corpus
    from docpilot.drafting.locking import lock_golden

    started = time.perf_counter()
    config = load_config(config_path, overrides={"golden": _text(golden_path), "corpus": {"docs": _text(docs)}})
    corpus = load_corpus(config.corpus.docs, chunk_words=config.corpus.chunk_words)
    locked = lock_golden(Path(config.golden), corpus, ids)
    kept = f"; {locked.kept} kept their earlier lock" if locked.kept else ""
    click.echo(clean(f"wrote {locked.path}: {locked.records} records locked ({locked.entries} gold entries) against "
                     f"{config.corpus.docs}{kept}, in {time.perf_counter() - started:.1f} s"))
    if locked.refreshed:
        click.echo(clean(f"locked again over gold that had moved, changed or gone: {', '.join(locked.refreshed)}"))


from docpilot.cli.drafts import accept, draft  # noqa: E402

golden.add_command(draft)
golden.add_command(accept)
