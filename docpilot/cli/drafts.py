"""`docpilot golden draft` and `docpilot golden accept`: a golden set drafted from the docs, and its review.

The `golden` group (``docpilot.cli.golden``) adds both commands.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import click

from docpilot.cli._errors import handle_errors
from docpilot.config.loading import load_config
from docpilot.errors import InputError
from docpilot.golden.draft import DEFAULT_COUNT, DEFAULT_PER_PAGE, Drafted
from docpilot.reports.terminal import clean

_SHOWN = 5  # ids shown per reason a section was left out


@click.command("draft")
@click.option("--docs", type=click.Path(path_type=Path),
              help="Docs folder to draft from (default: `corpus.docs` in the config).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("evals/drafts.yaml"), show_default=True,
              help="Where to write the drafts.")
@click.option("--count", type=click.IntRange(min=1), default=DEFAULT_COUNT, show_default=True,
              help="Questions to draft (positives; negatives come on top).")
@click.option("--per-page", type=click.IntRange(min=1), default=DEFAULT_PER_PAGE, show_default=True,
              help="Most questions drawn from one page.")
@click.option("--negatives", type=click.IntRange(min=0), help="Negatives to draft (default: a tenth of --count, at least 2).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sections' order.")
@click.option("--model", "model", metavar="PROVIDER[:NAME]",
              help="Have a model reword each question as a user would ask it (`local` runs offline).")
@click.option("--follow-ups", "follow_ups", is_flag=True,
              help="Add a second turn to some drafts, from another section of the same page and worded to lean "
                   "on the first: those drafts are written as conversations.")
@click.option("--force", is_flag=True, help="Replace the file when it exists.")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="Config file (default: configs/docpilot.yaml when present).")
@click.option("--from", "log", type=click.Path(path_type=Path, dir_okay=False),
              help="Draft from a production log instead of the docs: the questions of one coverage gap (--group).")
@click.option("--group", "group", type=click.IntRange(min=1),
              help="With --from: the rank of the gap group to draft from (`docpilot field LOG` lists them).")
@handle_errors
def draft(docs: Path | None, out: Path, count: int, per_page: int, negatives: int | None, seed: int,
          model: str | None, force: bool, config_path: Path | None, log: Path | None = None,
          group: int | None = None, follow_ups: bool = False) -> None:
    """Draft a golden set from the docs: questions from their headings, definitions, options and defaults.

    Every eligible page gets a question first, then pages get more in proportion to
    their sections, at most --per-page each. Each draft's gold is the section it was
    drawn from and its gold answer the sentence it was drawn from. Without --model the
    drafts are the same, byte for byte, for the same docs, seed and options. With
    --follow-ups, at most one draft in two gets a second turn from another section of
    its page, its question leaning on the first ("And how do I clear it?"), and is
    written as a conversation; the bias figures are then given for first turns and
    follow-ups apart. A draft is a start for a person to review (`docpilot golden accept` moves reviewed ones into
    the golden set), never the proof. Exit status: 0; 2 when the docs cannot be read or
    --out exists without --force.
    """
    from docpilot.corpus.pages import load_corpus
    from docpilot.golden.draft import draft_golden, draft_records, drafts_text
    from docpilot.golden.gold_state import lock_path
    from docpilot.golden.lock import build_lock, lock_text
    from docpilot.reports.output import write_atomically
    from docpilot.retrieval.bias import BiasMeter

    if out.exists() and not force:
        raise InputError("the file exists", path=out,
                         hint="pass --force to replace it, or --out for another file")
    if (log is None) != (group is None):
        raise click.UsageError("--from LOG and --group N go together: the questions of one coverage gap of the log")
    config = load_config(config_path, overrides={"corpus": {"docs": str(docs) if docs else None}})
    if log is not None:
        _draft_from_log(config, log, group, count, out)
        return
    corpus = load_corpus(config.corpus.docs, chunk_words=config.corpus.chunk_words)
    drafted = draft_golden(corpus, count=count, per_page=per_page, seed=seed, negatives=negatives)
    notes: list[str] = []
    if model:
        from docpilot.drafting.rewrite import rewrite_drafts

        drafted, notes = rewrite_drafts(drafted, corpus, config, model)
    if follow_ups:  # after a model's rewording: a follow-up is worded by its template, to lean on its first turn
        from docpilot.drafting.follow_ups import add_follow_ups

        drafted = add_follow_ups(drafted, corpus, seed=seed)
    records = [r for r in draft_records(drafted) if r.gold]
    meter = BiasMeter(corpus, config.retrieval)
    write_atomically(out, drafts_text(drafted, docs=str(config.corpus.docs), seed=seed, notes=notes), "drafts")
    lock = write_atomically(lock_path(out), lock_text(build_lock(records, corpus)), "golden lock")
    _show_drafted(drafted, out)
    click.echo(f"locked what each draft's section says in {lock}: `docpilot golden check` tells a draft whose "
               "section changed since")
    if drafted.follow_ups:
        firsts = meter.measure_set([r for r in records if (r.turn or 1) == 1])
        later = meter.measure_set([r for r in records if (r.turn or 1) > 1])
        click.echo(f"bias of the drafts, first turns: {bias_line(firsts)}")
        click.echo(f"bias of the drafts, follow-ups: {bias_line(later)}")
    else:
        click.echo(f"bias of the drafts: {bias_line(meter.measure_set(records))}")
    click.echo(f"next: read them, then `docpilot golden check --golden {out}` and "
               f"`docpilot golden accept ID... --from {out} --into {config.golden}`")


def _show_drafted(drafted: Drafted, out: Path) -> None:
    chats = (f", {len(drafted.follow_ups)} of them with a follow-up (written as conversations, tag follow-up)"
             if drafted.follow_ups else "")
    click.echo(f"wrote {out}: {len(drafted.positives)} questions{chats} and {len(drafted.negatives)} negatives "
               f"(tag needs-check: confirm the docs do not answer them)")
    share = f" ({drafted.covered_pages / drafted.eligible_pages:.0%})" if drafted.eligible_pages else ""
    click.echo(f"pages covered: {drafted.covered_pages} of {drafted.eligible_pages} eligible{share}, "
               f"of {drafted.pages} in the docs; sections: {drafted.covered_sections} of "
               f"{drafted.eligible_sections} eligible")
    by_reason: dict[str, list[str]] = defaultdict(list)
    for item in drafted.left_out:
        by_reason[item.reason.split(" (")[0]].append(item.id)
    if by_reason:
        click.echo("left out:")
    for reason, ids in sorted(by_reason.items(), key=lambda entry: -len(entry[1])):
        more = f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
        kind = "pages" if all("#" not in i for i in ids) else "sections"
        click.echo(clean(f"  {len(ids)} {kind}, {reason}: {', '.join(ids[:_SHOWN])}{more}"))


def bias_line(bias) -> str:
    """A set's bias figures on one line."""
    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    bands = ", ".join(f"{name} {count}" for name, count in bias.bands.items())
    return (f"overlap {shown(bias.overlap)} ({bands}), heading words reused {shown(bias.heading)}, "
            f"leakage {shown(bias.leakage)}, BM25 gold at 1 {shown(bias.bm25_at_1)}, in top 8 "
            f"{shown(bias.bm25_in_8)}, median rank {bias.bm25_median_rank if bias.bm25_median_rank else '-'} "
            f"(over {bias.positives} positives)")


@click.command("accept")
@click.argument("ids", nargs=-1, required=True)
@click.option("--from", "drafts_path", type=click.Path(path_type=Path), default=Path("evals/drafts.yaml"),
              show_default=True, help="The file of drafts.")
@click.option("--into", "into", type=click.Path(path_type=Path),
              help="The golden set to append to (default: `golden` in the config).")
@click.option("--docs", type=click.Path(path_type=Path),
              help="Docs folder to lock a draft against when the drafts' lock lacks it (default: `corpus.docs`).")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="Config file (default: configs/docpilot.yaml when present).")
@handle_errors
def accept(ids: tuple[str, ...], drafts_path: Path, into: Path | None, docs: Path | None,
           config_path: Path | None) -> None:
    """Move reviewed drafts into the golden set, appended after its records, its comments kept.

    The draft-only fields (origin, source) and the tags draft and needs-check are
    dropped; the split is the page's (a hash of its page, or the split the golden set
    already gives that page), so one page never feeds both dev and test. The golden
    set's lock (golden.lock beside it) takes each accepted record's gold as the drafts'
    lock held it when drafted. IDS may name drafts, or `all`. Exit status: 0; 2 when an
    id names no draft, is already in the golden set, or either file has an error.
    """
    from docpilot.corpus.pages import load_corpus
    from docpilot.drafting.accept import accept_drafts

    config = load_config(config_path, overrides={"golden": str(into) if into else None,
                                                 "corpus": {"docs": str(docs) if docs else None}})
    moved = accept_drafts(drafts_path, Path(config.golden), list(ids),
                          lambda: load_corpus(config.corpus.docs, chunk_words=config.corpus.chunk_words))
    for line in moved:
        click.echo(clean(line))


def _draft_from_log(config, log: Path, group: int, count: int, out: Path) -> None:
    """Drafts from one coverage gap of a production log, as ``docpilot field`` groups it and ``field-draft`` drafts it."""
    from docpilot.field.drafts import draft_group, drafts_text
    from docpilot.field.run import score_log
    from docpilot.reports.output import write_atomically

    if not log.is_file():
        raise InputError("no such log", path=log, hint="give the JSONL or CSV log `docpilot field` reads")
    report = score_log(config, log)
    drafts = draft_group(report, group, most=count)
    write_atomically(out, drafts_text(drafts, report, group), "drafts")
    click.echo(f"wrote {len(drafts)} draft(s) from gap {group} of {log} to {out}; review them, then "
               f"`docpilot golden accept ID... --from {out}`")
