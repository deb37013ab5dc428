"""`docpilot improve [REPORT]` and `docpilot improve compare A B`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.cli.status import reports_folder, warn
from docpilot.reports.terminal import clean

_SHOWN_FLIPS = 10


class _ReportOrCommand(click.Group):
    """A group whose first argument is a subcommand name or, failing that, a report.

    ``docpilot improve compare A B`` runs the subcommand; ``docpilot improve r.json``
    and ``docpilot improve`` (the last report) diagnose a run.
    """

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args and args[0] in self.commands:
            return super().resolve_command(ctx, args)
        return "REPORT", _diagnose_command, args


class _GroupNamedContext(click.Context):
    """The default command's context: usage and help lines use the group's name."""

    @property
    def command_path(self) -> str:
        return self.parent.command_path if self.parent is not None else super().command_path


class _DefaultCommand(click.Command):
    """`docpilot improve [REPORT]`: runs when the first argument names no subcommand."""

    context_class = _GroupNamedContext


_SHARED_OPTIONS = (
    click.option("--reports", "reports_dir", type=click.Path(file_okay=False),
                 help="Folder of reports, for run ids and the default report (default: reports_dir)."),
    click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML)."),
    click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    click.option("--variant", metavar="NAME",
                 help="In a run of several variants, read this one (default: the baseline, the first)."),
)


def _shared(func):
    for option in reversed(_SHARED_OPTIONS):
        func = option(func)
    return func


def _docs_option(func):
    func = click.option("--dry-run", is_flag=True,
                        help="With --apply: print the merged vocabulary.json and write nothing.")(func)
    func = click.option("--apply", "apply_", is_flag=True,
                        help="Write the vocabulary.json entries chosen on the dev records into the docs' "
                             "vocabulary.json (only those that move records of the CAUSEs named, if any).")(func)
    func = click.option("--try-embedders", is_flag=True,
                        help="Try every embedder that can run here, however long its first index build "
                             "(default: only those projected within 30 s).")(func)
    func = click.option("--settings/--no-settings", "try_settings", default=True,
                        help="Try the other retrieval settings on the dev records when gold ranks past 8 "
                             "(default: on; --no-settings keeps to the vocabulary and the docs).")(func)
    return click.option("--docs", type=click.Path(file_okay=False),
                        help="Docs folder to work edits out from (default: the one the run used).")(func)


@main.group("improve", cls=_ReportOrCommand, invoke_without_command=True,
            subcommand_metavar="[REPORT] [CAUSE...] | compare [A [B]]")
@_shared
@_docs_option
@click.pass_context
@handle_errors
def improve_group(ctx, reports_dir, config_path, as_json, variant, docs, try_settings, apply_, dry_run,
                  try_embedders=False):
    """Give every failing record of a run its cause and edits to try.

    REPORT is a report file or a run id; without one, the last report in reports_dir.
    --apply writes the vocabulary.json entries chosen over the failing dev records
    into the docs (with CAUSE ids after it, only the entries that move records of
    those causes). `docpilot improve compare A B` tests whether run B differs from
    run A record by record. Exit status: 0, or 2 when a report or vocabulary.json
    cannot be read.
    """
    if ctx.invoked_subcommand is None:
        _diagnose(None, reports_dir, config_path, as_json, docs, apply_=apply_, dry_run=dry_run, causes=(),
                  variant=variant, try_settings=try_settings, try_embedders=try_embedders)


@click.command("REPORT", cls=_DefaultCommand)
@click.argument("words", nargs=-1, metavar="[REPORT] [CAUSE...]")
@_shared
@_docs_option
@click.pass_context
@handle_errors
def _diagnose_command(ctx, words, reports_dir, config_path, as_json, variant, docs, try_settings, apply_, dry_run,
                      try_embedders=False):
    """Give every failing record of REPORT (a file or run id) its cause and edits to try."""
    from docpilot.improve.taxonomy import CAUSE_IDS

    parent = ctx.parent.params if ctx.parent is not None else {}
    apply_, dry_run = apply_ or bool(parent.get("apply_")), dry_run or bool(parent.get("dry_run"))
    causes = tuple(w for w in words if w in CAUSE_IDS)
    references = [w for w in words if w not in CAUSE_IDS]
    if len(references) > 1:
        raise click.UsageError(f"one report at a time, got {', '.join(references)}; the words after it must be "
                               f"causes ({', '.join(CAUSE_IDS)})")
    if causes and not apply_:
        raise click.UsageError(f"cause {causes[0]!r} is named without --apply: causes choose which "
                               "vocabulary entries --apply writes")
    _diagnose(references[0] if references else None, reports_dir or parent.get("reports_dir"),
              config_path or parent.get("config_path"), as_json or bool(parent.get("as_json")),
              docs or parent.get("docs"), apply_=apply_, dry_run=dry_run, causes=causes,
              variant=variant or parent.get("variant"),
              try_settings=try_settings and parent.get("try_settings", True),
              try_embedders=try_embedders or bool(parent.get("try_embedders")))


def _store(reports_dir: str | None, config_path: str | None):
    from docpilot.reports.store import ReportStore

    return ReportStore(reports_folder(reports_dir, config_path))


def _diagnose(reference, reports_dir, config_path, as_json, docs, *, apply_: bool, dry_run: bool,
              causes: tuple[str, ...], variant: str | None = None, try_settings: bool = True,
              try_embedders: bool = False) -> None:
    from docpilot.errors import ReportError
    from docpilot.improve.diagnosis import diagnose, load_docs
    from docpilot.reports.report import load_report
    from docpilot.reports.store import resolve_report

    store = _store(reports_dir, config_path)
    if reference is None:
        latest = store.latest()
        warn(store.problems)
        if latest is None:
            raise ReportError(f"{store.root}: no readable report; run `docpilot eval` first, or pass REPORT")
        report, path = latest.load(), latest.path
    else:
        path = resolve_report(reference, store)
        report = load_report(path)
    from docpilot.reports.variants import one_variant

    report = one_variant(report, variant, path=path)  # a run of several: the variant asked for, or the baseline
    corpus, notes = load_docs(report, docs, strict=apply_ or dry_run)
    diagnosis = diagnose(report, corpus, path=path, notes=notes)
    if corpus is not None and try_settings:
        from docpilot.improve.settings import BUILD_BUDGET_S, propose_settings

        proposal = propose_settings(report, corpus, say=lambda line: click.echo(line, err=True),
                                    budget_s=None if try_embedders else BUILD_BUDGET_S)
        diagnosis = diagnosis.model_copy(update={"settings": proposal})
    if apply_ or dry_run:
        _apply(diagnosis, corpus, causes, dry_run=dry_run, as_json=as_json, report_path=path,
               config_path=config_path)
        return
    if as_json:
        click.echo(diagnosis.model_dump_json(indent=2, ensure_ascii=True))
        return
    _render_diagnosis(diagnosis)
    _render_settings(diagnosis.settings)


def _apply(diagnosis, corpus, causes, *, dry_run: bool, as_json: bool, report_path, config_path=None) -> None:
    """Write (or, dry, print) the chosen vocabulary entries and settings edit, and name the commands that prove them."""
    from docpilot.errors import ReportError
    from docpilot.improve.apply import apply_vocabulary, select
    from docpilot.improve.vocabulary import RETRIEVAL_CAUSES

    if corpus is None:
        raise ReportError("the run's docs folder cannot be read, so there is no vocabulary.json to write; "
                          "pass --docs DOCS, the folder the run read")
    applied = apply_vocabulary(corpus.root, select(diagnosis.vocabulary, causes), dry_run=dry_run)
    configured = _apply_settings(diagnosis.settings, config_path, dry_run=dry_run, as_json=as_json)
    if as_json:
        click.echo(applied.model_dump_json(indent=2, ensure_ascii=True))
        return
    for cause in causes:
        if cause not in RETRIEVAL_CAUSES:
            click.echo(f"note: {cause}: --apply writes vocabulary.json entries, which move retrieval causes only "
                       f"({', '.join(RETRIEVAL_CAUSES)}); make the other edits `docpilot improve` lists by hand")
    if dry_run:
        click.echo(applied.text, nl=False)
    if not applied.changes:
        target = diagnosis.assistant.name if diagnosis.assistant.kind == "target" else None
        why = (f"the run measured target {target}, and a vocabulary.json entry moves DocPilot's retriever alone"
               if target else "no vocabulary entry was chosen over this run's failing dev records")
        click.echo(clean(f"nothing to write: {why} ({applied.path} is unchanged)"))
        if configured and not dry_run:
            _prove_on_test(diagnosis, corpus)
        return
    verb = "would change" if dry_run else "changed"
    click.echo(clean(f"{verb} {applied.path}:"))
    for change in applied.changes:
        sign = "+" if change.new else "~"
        click.echo(clean(f"  {sign} \"{change.word}\": add {', '.join(map(repr, change.added))}"))
        click.echo(clean(f"      {change.reason}"))
    if not dry_run:
        _prove_on_test(diagnosis, corpus)


def _prove_on_test(diagnosis, corpus) -> None:
    header = diagnosis.report
    mode = " --gate-only" if header.get("gate_only") else ""
    click.echo("prove it on the test split, which chose none of these edits:")
    click.echo(clean(f"  docpilot eval --split test{mode} --docs {corpus.root}   (with the rest of the run's flags), "
                     "before and after the edit"))
    click.echo("  docpilot improve compare <test run before> <test run after>")


def _apply_settings(proposal, config_path, *, dry_run: bool, as_json: bool) -> bool:
    """Write the proposed retrieval edit into the config (comments and order kept); whether there was one."""
    from docpilot.config.loading import DEFAULT_PATH
    from docpilot.improve.calibration import write_config

    if proposal is None or not proposal.edit:
        return False
    destination = config_path or str(DEFAULT_PATH)
    values = {key.partition(".")[2]: value for key, value in proposal.edit.items()}
    if not dry_run:
        write_config(destination, "retrieval", values)
    if not as_json:
        verb = "would set" if dry_run else "set"
        shown = ", ".join(f"{key}: {value}" for key, value in proposal.edit.items())
        click.echo(clean(f"{verb} {shown} in {destination} ({proposal.reason})"))
    return True


def _render_settings(proposal) -> None:
    """The retrieval settings tried on the dev positives, with each one's figures and first-build cost."""
    if proposal is None:
        return
    click.echo("")
    click.echo(click.style("retrieval settings", bold=True) + f" — {len(proposal.records)} of {proposal.positives} "
               "dev positives ranked their gold past 8 or left it unprimed")
    for trial in [proposal.current, *proposal.trials]:
        name = trial.retriever + (f" + {trial.embedder}" if trial.embedder else "")
        label = "this run" if trial is proposal.current else "tried"
        cost = ""
        if trial.build_s is not None:
            tokens = f", {trial.tokens:,} tokens" if trial.tokens else ""
            cost = f"; first index build about {trial.build_s:,.1f} s here{tokens}"
        click.echo(clean(f"  {label:<8} {name:<18} recall@8 {trial.recall:.3f}  MRR {trial.mrr:.3f}{cost}"))
    for skipped in proposal.skipped:
        click.echo(clean(f"  not tried {skipped}"))
    if proposal.edit:
        shown = ", ".join(f"{key}: {value}" for key, value in proposal.edit.items())
        click.echo(clean(f"  try (config) {shown}"))
        click.echo(clean(f"        → {proposal.reason}; `docpilot improve --apply` writes it"))
    else:
        click.echo(clean(f"  {proposal.reason}"))


def _render_diagnosis(diagnosis) -> None:
    header = diagnosis.report
    mode = ", gate-only" if header["gate_only"] else ""
    answered = f", answered by target {diagnosis.assistant.name}" if diagnosis.assistant.kind == "target" else ""
    click.echo(clean(f"DocPilot improve — run {header['run_id']} ({header['split']} split{mode}{answered}): "
                     f"{diagnosis.failing} of {diagnosis.records} records failing"))
    for warning in diagnosis.warnings:
        click.echo(f"warning: {warning}", err=True)
    for note in diagnosis.notes:
        click.echo(clean(f"note: {note}"))
    if not diagnosis.failures:
        click.echo("no failing record: every record passed every check of the taxonomy")
        return
    click.echo("")
    width = max(len(cause) for cause in diagnosis.causes)
    for cause, count in diagnosis.causes.items():
        click.echo(f"  {cause:<{width}}  {count:>3}")
    current = None
    for failure in diagnosis.failures:
        if failure.cause != current:
            current = failure.cause
            click.echo("")
            click.echo(click.style(f"{current}", bold=True) + f" — {failure.moves}")
        also = f"  (also: {', '.join(failure.also)})" if failure.also else ""
        click.echo(clean(f"\n  {failure.id}  [{failure.kind}, {failure.split}]{also}"))
        click.echo(clean(f"    question: {failure.question}"))
        if failure.languages:
            click.echo(clean(f"    language: {_languages(failure.languages)}"))
        click.echo(clean(f"    {failure.detail}"))
        for edit in failure.edits:
            # A config edit's change already names its option; do not say it twice.
            named = edit.kind == "config" or edit.change.startswith(edit.target)
            what = edit.change if named else f"{edit.target}: {edit.change}"
            click.echo(clean(f"    try ({edit.kind}) {what}"))
            if edit.effect:
                click.echo(clean(f"        → {edit.effect}"))


def _languages(languages: dict[str, str | None]) -> str:
    """`expected en; detected: question en, answer de`; `?` where nothing reliable was detected, or no answer."""
    return (f"expected {languages.get('expected') or '?'}; detected: question {languages.get('question') or '?'}, "
            f"answer {languages.get('answer') or '?'}")


@improve_group.command("compare")
@click.argument("a", required=False)
@click.argument("b", required=False)
@_shared
@handle_errors
def compare_command(a, b, reports_dir, config_path, as_json, variant):
    """Test whether run B differs from run A, record by record.

    A and B are report files or run ids. Without B, B is the newest run; without
    either, A is the newest run's previous comparable one (same golden set, split and
    selection), so after a change and a new `docpilot eval`, `improve compare` alone
    tests the change. Each outcome is named as the scorecard names its metric. Binary
    outcomes (recall@8, refusal correct) get the exact McNemar test, continuous ones
    (answer_f1, ndcg@8, mrr) the Wilcoxon signed-rank test. Choose a change on the
    dev split; prove it on test.
    """
    from docpilot.reports.compare import compare_reports
    from docpilot.reports.report import load_report
    from docpilot.reports.store import resolve_report

    store = _store(reports_dir, config_path)
    if b is None:
        path_a, path_b = _newest_pair(a, store)
    else:
        path_a, path_b = resolve_report(a, store), resolve_report(b, store)
    from docpilot.reports.variants import one_variant

    # A run of several variants is read as its variant --variant names (else its baseline).
    a_run, b_run = load_report(path_a), load_report(path_b)
    a_run = one_variant(a_run, variant, path=path_a) if a_run.variants else a_run
    b_run = one_variant(b_run, variant, path=path_b) if b_run.variants else b_run
    comparison = compare_reports(a_run, b_run, store=store, paths=(path_a, path_b))
    warn(store.problems)
    if as_json:
        click.echo(comparison.model_dump_json(indent=2, ensure_ascii=True))
        return
    _render_comparison(comparison)


def _newest_pair(a, store):
    """A (as given, else the newest run's previous comparable run) and the newest run."""
    from docpilot.errors import ReportError
    from docpilot.reports.store import resolve_report

    newest = store.latest()
    if newest is None or newest.path is None:
        raise ReportError(f"no report in {store.root} to compare; run `docpilot eval` twice, before and after "
                          "a change, or pass the two reports: docpilot improve compare A B")
    if a is not None:
        return resolve_report(a, store), newest.path
    previous, _ = store.previous_comparable(newest)
    if previous is None or previous.path is None:
        raise ReportError(f"the newest run {newest.run_id} has no earlier comparable run in {store.root} "
                          "(same golden set, set, split, selection, gate-only and runtime); "
                          "pass the two reports: docpilot improve compare A B")
    return previous.path, newest.path


def _render_comparison(comparison) -> None:
    from docpilot.reports.compare import describe_effect, describe_move, describe_p

    console = Console(highlight=False)
    if not console.is_terminal and console.width < 100:
        console = Console(highlight=False, width=100)  # piped output: room for the whole table
    a, b = comparison.a, comparison.b
    console.print(escape(f"A: run {a['run_id']} ({a['created_at']}, {a['split']} split)"), soft_wrap=True)
    console.print(escape(f"B: run {b['run_id']} ({b['created_at']}, {b['split']} split)"), soft_wrap=True)
    console.print(escape(f"{comparison.records} records paired; changed between the runs: "
                         f"{', '.join(comparison.changed) or 'nothing'}"))
    for change in comparison.settings:
        console.print(escape(f"  setting {change.describe()}"), soft_wrap=True)
    if comparison.pages is not None:
        console.print(escape(f"  docs: {comparison.pages.describe()}"), soft_wrap=True)
    table = Table(title_justify="left")
    for name, justify in (("outcome", "left"), ("test", "left"), ("n", "right"), ("A", "right"), ("B", "right"),
                          ("B − A", "right"), ("+/−", "right"), ("p", "right"), ("verdict", "left")):
        table.add_column(name, justify=justify)
    for test in comparison.tests:
        if test.n == 0:
            table.add_row(escape(test.outcome), test.test, "0", "", "", "", "", "n/a", "skipped")
            continue
        flips = f"{test.c}/{test.b}" if test.test == "mcnemar" else f"{len(test.better)}/{len(test.worse)}"
        verdict = {"better": "[green]better[/]", "worse": "[red]worse[/]"}.get(test.direction, "no evidence")
        table.add_row(escape(test.outcome), test.test, str(test.n), f"{test.mean_a:.3f}", f"{test.mean_b:.3f}",
                      describe_effect(test.effect), flips, describe_p(test.p_value), verdict)
    console.print(table)
    console.print("+/−: records better/worse in B; verdict at p < 0.05, two-sided")
    for test in comparison.tests:
        if test.note:
            console.print(escape(f"  {test.outcome}: {test.note}"), soft_wrap=True)
        for label, flips in (("better", test.better), ("worse", test.worse)):
            if flips:
                shown = ", ".join(f"{f.id} ({describe_move(f.a, f.b)})" for f in flips[:_SHOWN_FLIPS])
                more = f" and {len(flips) - _SHOWN_FLIPS} more" if len(flips) > _SHOWN_FLIPS else ""
                console.print(escape(f"  {test.outcome} {label} in B: {shown}{more}"), soft_wrap=True)
    for warning in comparison.warnings:
        console.print(escape(f"warning: {warning}"), soft_wrap=True)
