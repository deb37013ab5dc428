"""Where a run runs, decided once: ``plan(config, options) -> Plan``, its executor and its runtime.

Every usage error of a run's options is raised here, before anything loads or is
asked (``UsageError``, ``ConfigError`` and ``MissingExtraError``, exit 2): a target
with ``--runtime local``, ``--url`` without the server runtime, ``--gate-only`` against
an assistant with nothing to rank by, ``--runner dask`` inline, variants under Prefect.
The plan's executor is what ``evaluate(job, executor)`` sends the shards through:
inline (``run.evaluation.Inline``), or Prefect task runs, on this process or on a Dask
cluster (``PrefectExecutor``, which imports Prefect when the run starts, so an inline
run never loads it). The command line and the nightly schedule both plan through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from docpilot.config.model import Config
from docpilot.errors import ConfigError, OrchestratorError, UsageError
from docpilot.run.evaluation import Executor, Inline
from docpilot.run.orchestrator import Choice, Orchestration, choose, configured_api

if TYPE_CHECKING:
    from docpilot.run.context import RunContext
    from docpilot.run.job import EvalJob
    from docpilot.schema import Report, Row

Runtime = Literal["local", "server"]


@dataclass(frozen=True)
class Options:
    """How the user asked the run to be run (the ``eval`` command's flags, or a schedule's parameters)."""

    orchestrator: Choice = "auto"
    runner: Literal["local", "dask"] = "local"
    dask_address: str | None = None
    runtime: Runtime | None = None
    """None: the server runtime when a target is named, else local."""
    url: str | None = None
    """A running ``docpilot serve`` to measure (server runtime)."""
    target: str | None = None
    """``--target NAME``: measure this target of the config alone."""
    gate_only: bool = False
    variants: Sequence = field(default_factory=tuple)
    """The run's variants (``config.variants.Variant``), resolved; a run of one has none."""
    scheduled: bool = False


@dataclass(frozen=True)
class Plan:
    """What the run is: its config (a target chosen), who answers (``runtime``, ``url``), and where it runs."""

    config: Config
    runtime: Runtime
    url: str | None
    executor: Executor


def plan(config: Config, options: Options) -> Plan:
    """The run ``options`` ask for over ``config``; every usage error raised here, nothing loaded."""
    if options.dask_address and options.runner != "dask":
        raise UsageError("--dask-address names the scheduler of --runner dask; add --runner dask")
    named = _named_target(options.target, config, options.variants)
    runtime = _runtime(named, options.runtime, options.url)
    if runtime == "server" and options.gate_only and not _searchable(config, options.variants):
        raise UsageError(_gate_only_refusal(named))
    if options.url and runtime != "server":
        raise UsageError("--url names the server of --runtime server; add --runtime server")
    orchestration = choose(options.orchestrator, runner=options.runner, scheduled=options.scheduled)
    _require_extras(options, orchestration, runtime, options.url or named)
    if options.variants:
        orchestration = _inline_for_variants(options, orchestration, runtime)
        if runtime == "server" and config.target is None:  # every variant names a target: no server starts
            config = config.model_copy(update={"target": options.variants[0].config.target})
    if runtime == "server" and options.runner == "dask":
        raise UsageError(f"--runner dask runs the stages in worker processes; with --runtime {runtime} a server "
                         "runs them; drop --runner dask, or use --runtime local")
    url = config.targets[config.target].url if config.target is not None and not options.url else options.url
    if runtime == "server" and options.url:
        from docpilot.api.token import check_token

        check_token(options.url)  # one request: a missing or wrong token stops the run before any question
    return Plan(config, runtime, url, _executor(orchestration, options))


def _executor(orchestration: Orchestration, options: Options) -> Executor:
    if orchestration.orchestrator == "inline":
        return Inline(orchestration)
    from docpilot.tasks import quiet_prefect

    quiet_prefect()  # before Prefect is first imported
    return PrefectExecutor(orchestration, runner=options.runner, dask_address=options.dask_address)


@dataclass(frozen=True)
class PrefectExecutor:
    """The run inside the eval flow, a Prefect task run per shard: in this process, or on Dask's workers.
    Prefect is imported when the run starts, not when it is planned."""

    orchestration: Orchestration
    runner: Literal["local", "dask"] = "local"
    dask_address: str | None = None

    def shards(self, run: RunContext, shards: Iterator[list]) -> Iterator[list[Row]]:
        """Each shard a task run (on a Dask worker with ``runner="dask"``); their rows in shard order."""
        if self.runner == "dask":
            from docpilot.flows.dask import dask_shards

            return dask_shards(run, shards)
        from docpilot.flows.eval import prefect_shards

        return prefect_shards(run, shards)

    def around(self, job: EvalJob, body: Callable[[], Report]) -> Report:
        """Run ``body`` (the run) inside the eval flow, against the configured Prefect API or one started."""
        from docpilot.flows.eval import flow_around

        if self.runner == "dask" or not configured_api():
            from docpilot.run.reaper import watch_children

            watch_children()  # Prefect's temporary server or a Dask cluster: gone if this process is killed
        return flow_around(job, body, runner=self.runner, dask_address=self.dask_address)


def with_target(config: Config, name: str | None) -> Config:
    """The config measuring its target ``name`` alone, without the config file's variants (None: as it is):
    apply it before the variants are resolved, then plan with ``Options.target``."""
    if name is None:
        return config
    if name not in config.targets:
        raise ConfigError(f"--target {name}: the config has no such target",
                          hint=f"the config's targets: {', '.join(config.targets) or 'none; add a targets: section'}")
    return config.model_copy(update={"target": name, "variants": {}})  # one target alone (--variant still adds)


def _named_target(target: str | None, config: Config, variants: Sequence) -> str | None:
    """Where the run names a target, for messages (``--target``, the config's `target:`, a variant's); else None.

    A target in the config is measured as ``--target`` measures it, over HTTP: it is never ignored.
    """
    if target is not None:
        return f"--target {target}"
    if config.target is not None:
        return f"the config's target {config.target}"
    return next((f"variant {v.name}'s target {v.config.target}" for v in variants if v.config.target), None)


def _runtime(named: str | None, runtime: Runtime | None, url: str | None) -> Runtime:
    """The server runtime when a target is ``named`` (it is measured over HTTP), else the chosen one or local."""
    if not named:
        return runtime or "local"
    if runtime == "local":
        raise UsageError(f"{named} is measured over HTTP, by the server runtime, and --runtime local runs "
                         "DocPilot's own assistant in this process; drop --runtime local, or the target")
    if url:
        raise UsageError(f"--url names DocPilot's own server, and {named} has its URL in the config; "
                         "drop --url, or the target")
    return "server"


def _searchable(config: Config, variants: Sequence) -> bool:
    """Whether every target the run asks offers a search endpoint (``targets.NAME.search``) for --gate-only."""
    names = [v.config.target for v in variants] if variants else [config.target]
    return all(name is not None and config.targets[name].search is not None for name in names)


def _gate_only_refusal(named: str | None) -> str:
    """Why --gate-only cannot run with the server runtime, naming what chose it: a target ``named``, else the flag."""
    if named:
        return (f"--gate-only measures retrieval alone, and {named} answers over HTTP with no search endpoint "
                "to rank by: give it one (targets.NAME.search: url, body, sources), or run without --gate-only")
    return "--gate-only measures retrieval in this process; it does not apply to --runtime server"


def _require_extras(options: Options, orchestration: Orchestration, runtime: Runtime, url: str | None) -> None:
    """Stop in one line, before anything loads, when the run needs an extra that is not installed."""
    from docpilot.extras import require_extra

    if options.runner == "dask":
        if orchestration.orchestrator == "inline":
            raise OrchestratorError("--runner dask runs the shards as Prefect task runs, so it cannot run inline; "
                                    "fix: drop --orchestrator inline, or drop --runner dask")
        require_extra("dask", "--runner dask", otherwise="drop --runner dask to run in this process")
    elif orchestration.orchestrator == "prefect":
        require_extra("prefect", f"running under Prefect ({orchestration.reason})",
                      otherwise="run with --orchestrator inline" if options.orchestrator == "auto" else None)
    if runtime == "server" and not url:
        require_extra("serve", "--runtime server without --url (it starts `docpilot serve` for the run)",
                      otherwise="pass --url of a running server")


def _inline_for_variants(options: Options, orchestration: Orchestration, runtime: Runtime) -> Orchestration:
    """The orchestration of a run of several variants: inline, in this process."""
    if options.runner == "dask" or options.orchestrator == "prefect":
        raise UsageError("several variants run in this process, inline; "
                         "drop --runner dask and --orchestrator prefect, or run one variant")
    if runtime == "server" and not all(v.config.target is not None for v in options.variants):
        raise UsageError("--runtime server measures one server, with one configuration; "
                         "drop --variant and --models, or --runtime server, "
                         "or give every variant a target (target=NAME)")
    if orchestration.orchestrator == "inline":
        return orchestration
    return Orchestration("inline", "a run of several variants runs inline", "run one variant to run under Prefect")
