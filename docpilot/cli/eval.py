"""`docpilot eval` and `docpilot score`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors, interrupts_resume
from docpilot.cli._numbers import option_number
from docpilot.cli._outputs import chosen_outputs, output_options
from docpilot.cli._verdict import emit
from docpilot.config.model import ModelConfig
from docpilot.models.registry import PROVIDERS, provider_help


def _overrides(docs, golden, record_set, provider, model, base_url, concurrency, repeat=None) -> dict:
    from docpilot.models.registry import flag_overrides

    overrides = flag_overrides(docs=docs, provider=provider, model=model, base_url=base_url, concurrency=concurrency)
    if repeat is not None:
        overrides["model"]["repeat"] = repeat
    if golden:
        overrides["golden" if record_set == "golden" else "adversarial"] = golden
    return overrides


def check_settings(config) -> None:
    """Fail before the first model call on a setting the run would only trip over later.

    Every gate must name a known metric with a readable condition, and the provider must
    be one DocPilot has; the error lists the valid names (exit 2, no model called).
    """
    from docpilot.errors import ConfigError, InputError
    from docpilot.metrics.gates import RULE_KEY, gate_rule, parse_condition
    from docpilot.metrics.registry import get
    from docpilot.models.registry import PROVIDERS

    for name, condition in config.gates.items():
        try:
            if name == RULE_KEY:
                gate_rule(config.gates)
                continue
            get(name)
            parse_condition(condition, metric=name)
        except InputError as exc:
            message, _, hint = str(exc).partition("\n  fix: ")
            raise ConfigError(f"gates: {message}", hint=hint or None) from None
    if config.model.provider not in PROVIDERS:
        raise ConfigError(
            f"model.provider: unknown model provider {config.model.provider!r}",
            hint=f"use one of: {', '.join(PROVIDERS)}",
        )


def _warn_about(path: str) -> None:
    """One stderr line per kind of record warning (a negative with a gold_answer, ...): the run goes on."""
    from docpilot.golden.warnings import warning_lines
    from docpilot.run.job import record_warnings

    # The records were parsed for the job; their warnings came with them.
    for line in warning_lines(record_warnings(path), path):
        click.echo(f"warning: {line}", err=True)


@main.command("eval")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--docs", type=click.Path(file_okay=False), help="Docs folder (overrides corpus.docs).")
@click.option("--golden", type=click.Path(dir_okay=False),
              help="Record file: the golden set, or with --set adversarial the attack probes.")
@click.option(
    "--set", "record_set", type=click.Choice(["golden", "adversarial"]), default="golden", show_default=True,
    help="Run the golden set, or the attack probes (adversarial).",
)
@click.option("--split", type=click.Choice(["dev", "test", "all"]), default="all", show_default=True)
@click.option("--id", "record_ids", multiple=True, metavar="ID",
              help="Run only the record with this id (repeatable: any of them).")
@click.option("--tag", "tags", multiple=True, metavar="TAG",
              help="Run only the records carrying this tag (repeatable: any of them).")
@click.option("--limit", type=click.IntRange(min=1), help="Run at most N records: the first ones in file order.")
@click.option("--gate-only", is_flag=True, help="Retrieval only: call no model, report retrieval metrics.")
@click.option("--out", type=click.Path(dir_okay=False), help="Where to write the report JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print summary, gates, verdict and report path as JSON.")
@click.option(
    "--orchestrator",
    type=click.Choice(["auto", "prefect", "inline"]),
    default="auto",
    show_default=True,
    help="auto: Prefect when a Prefect API is configured or with --runner dask, inline otherwise.",
)
@click.option("--runtime", type=click.Choice(["local", "server"]),
              help="local (the default): run the assistant in this process; server: measure it over HTTP "
                   "(the default when a target is named).")
@click.option("--url", help="Base URL of a running `docpilot serve` (server runtime); without it one is started.")
@click.option("--target", "target_name", metavar="NAME",
              help="Measure this assistant of the config's targets (docs/targets.md), as the config's `target:` "
                   "does; implies --runtime server.")
@click.option(
    "--runner", type=click.Choice(["local", "dask"]), default="local", show_default=True,
    help="dask: run the shards on a Dask cluster, under Prefect (a Prefect server is started when none is set).",
)
@click.option("--dask-address", help="Dask scheduler for --runner dask, such as tcp://10.0.0.5:8786; "
              "without it a local cluster of two worker processes is started.")
@click.option("--provider", type=click.Choice(list(PROVIDERS)), help=provider_help())
@click.option("--model", help="Model name sent to the provider.")
@click.option("--base-url", help="Endpoint root of an OpenAI-compatible service, e.g. http://127.0.0.1:8080/v1.")
@click.option("--concurrency", type=option_number(ModelConfig, "concurrency"),
              help="Model calls in flight at once.")
@click.option("--repeat", type=option_number(ModelConfig, "repeat"),
              help="Ask each turn N times (model.repeat); retrieval runs once, each sample is a row and "
                   "cached apart.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the stage cache.")
@click.option(
    "--refresh",
    type=click.Choice(["retrieve", "model", "all"]),
    multiple=True,
    help="Compute this stage afresh and store the result again (repeatable).",
)
@click.option("--variant", "variant_options", multiple=True, metavar="NAME[=KEY=VALUE,...]",
              help="Run this variant beside the others, e.g. top3=prime.top_k=3 (repeatable; the first is the "
                   "baseline; replaces the config's variants).")
@click.option("--models", "models_option", metavar="MODEL,...",
              help="One variant per model, e.g. extractive,local,openai:gpt-4o-mini (before any --variant).")
@click.option("--gate-variant", metavar="NAME", help="The verdict reads this variant's gates only.")
@click.option("--allow-errors", is_flag=True, help="Count errored records without failing the run.")
@output_options(also=True)
@handle_errors
def eval_command(
    config_path, docs, golden, record_set, split, record_ids, tags, limit, gate_only, out, as_json, orchestrator,
    runtime, url, runner, dask_address, provider, model, base_url, concurrency, repeat, no_cache, refresh,
    variant_options, models_option, gate_variant, allow_errors, target_name=None, **formats,
):
    """Run the golden set through the assistant, score it, write a report and a verdict.

    --id, --tag and --limit choose records within the split: records with any of the
    ids, then those with any of the tags, then the first N. The report records the
    choice, and only runs with the same choice are compared.

    Exit status: 0 when every gate passed, 1 when a gate failed, 2 on a usage, config or
    input error.
    """
    outputs = chosen_outputs(formats)
    from docpilot.config.loading import load_config

    config = load_config(config_path, overrides=_overrides(docs, golden, record_set, provider, model, base_url,
                                                             concurrency, repeat))
    # The run's code comes in once the config holds: a config error is told without it.
    from docpilot import progress
    from docpilot.errors import UsageError
    from docpilot.flows.plan import Options, plan, with_target
    from docpilot.run.evaluation import evaluate
    from docpilot.run.job import build_job
    from docpilot.schema import Selection

    config = with_target(config, target_name)
    check_settings(config)
    variants = _variants(config, variant_options, models_option, gate_variant)
    if len(variants) == 1:  # a run of one, with the variant's settings
        config, variants = variants[0].config, []
    try:
        planned = plan(config, Options(orchestrator=orchestrator, runner=runner, dask_address=dask_address,
                                       runtime=runtime, url=url, target=target_name, gate_only=gate_only,
                                       variants=variants))
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    # Progress shows from the start: preparing the job opens the retriever, and building a
    # missing index with an embedder can take minutes. The assistant is asked nothing
    # until the run's first question is sent.
    with progress.shown() as shown:
        job = build_job(
            planned.config, record_set=record_set, split=split, gate_only=gate_only, use_cache=not no_cache,
            refresh=["retrieve", "model"] if "all" in refresh else sorted(set(refresh)),
            allow_errors=allow_errors, out=out, runtime=planned.runtime, url=planned.url,
            selection=Selection(ids=list(record_ids), tags=list(tags), limit=limit),
        )
        if record_set == "golden":
            _warn_about(job.golden)
        _check_outputs(out, job.config.reports_dir, outputs)
        with interrupts_resume() as interrupt:
            _load_prefect(planned.executor)
            report = evaluate(job, planned.executor, variants=variants, gate_variant=gate_variant, progress=shown,
                              interrupt=interrupt)
    path = report.path
    written = {}
    if outputs:
        from docpilot.readout.files import write_outputs

        written = write_outputs(report, report_path=path, **outputs)
    emit(report, path, as_json, live=True)
    if not as_json:
        for kind, where in written.items():
            click.echo(f"{kind}: {where}")
        if "html" not in written:
            # The page with every failing record's answer is one flag away: say which.
            import shlex

            beside = shlex.quote(str(Path(path).with_suffix(".html")))
            click.echo(f"html: not written; add --html report.html to this command, "
                       f"or run `docpilot report {shlex.quote(str(path))}` to write {beside}")
    sys.exit(0 if report.verdict == "pass" else 1)


def _variants(config, options, models, gate_variant) -> list:
    """The run's variants, checked before anything loads: names, keys, values, providers (exit 2)."""
    from docpilot.config.variants import declared_variants, resolve
    from docpilot.errors import ConfigError
    from docpilot.models.registry import model_variants, provider_defaults

    declared = declared_variants(config, options=options, models=model_variants(models) if models else ())
    variants = resolve(config, declared, provider_defaults)
    for variant in variants:
        try:
            check_settings(variant.config)
        except ConfigError as exc:
            raise ConfigError(f"variant {variant.name!r}: {str(exc).split(chr(10))[0]}", hint=exc.hint) from None
        if variant.config.model.provider == "openai" and not variant.config.model.base_url:
            raise ConfigError(f"variant {variant.name!r}: the openai provider needs an endpoint",
                              hint="set model.base_url in the variant, or pass --base-url for every variant")
    names = [v.name for v in variants]
    if gate_variant is not None and gate_variant not in names:
        raise click.UsageError(f"--gate-variant {gate_variant}: no such variant; "
                               f"the run's variants: {', '.join(names) or 'none (add --variant or --models)'}")
    return variants


def _load_prefect(executor) -> None:
    """Under Prefect, import it now, with signals held back: its import swallows an interrupt and prints it."""
    if executor.orchestration.orchestrator == "inline":
        return
    from docpilot.cli._errors import signals_held

    with signals_held():
        import docpilot.flows.eval  # noqa: F401


def _check_outputs(out, reports_dir, outputs: dict[str, str]) -> None:
    """Refuse unwritable or non-file outputs before the run, not after it."""
    from docpilot.readout.formats import FORMATS
    from docpilot.reports.output import check_output

    check_output(out or f"{reports_dir}/run.json", "report")
    for name, where in outputs.items():
        check_output(where, FORMATS[name].what)
