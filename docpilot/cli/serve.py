"""`docpilot serve`: run the assistant as an HTTP service."""

from __future__ import annotations

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.models.registry import PROVIDERS, provider_help


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; 0.0.0.0: every interface.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port; 0: any free one.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--docs", type=click.Path(file_okay=False), help="Docs folder (overrides corpus.docs).")
@click.option("--provider", type=click.Choice(list(PROVIDERS)), help=provider_help())
@click.option("--model", help="Model name sent to the provider.")
@click.option("--base-url", help="Endpoint root of an OpenAI-compatible service, e.g. http://127.0.0.1:8080/v1.")
@click.option("--no-auth", is_flag=True, help="Serve without a token; refused unless --host is a loopback address.")
@click.option(
    "--max-concurrency",
    type=click.IntRange(1, None),
    default=32,
    show_default=True,
    help="Questions answered at once; more wait in line.",
)
@click.option(
    "--queue-depth",
    type=click.IntRange(0, None),
    default=256,
    show_default=True,
    help="Questions that may wait for a slot, first come first served; more get 503 with Retry-After.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    help="Processes that answer (default: one per core, at most --max-concurrency); "
    "with more than one, the first process restarts any that ends.",
)
@click.option(
    "--allow-host", "allow_hosts", multiple=True, metavar="NAME",
    help="On a loopback host: also answer requests for this host name (a reverse proxy's); repeatable.",
)
@click.option("--access-log", is_flag=True, help="Log one line per request (query values redacted).")
@click.option(
    "--graceful-timeout",
    type=click.FloatRange(0, 86_400),
    metavar="SECONDS",
    help="On SIGTERM or Ctrl-C, how long the answers under way may take to finish before they are cut "
    "(default: server.graceful_timeout, 30).",
)
@handle_errors
def serve_command(
    host, port, config_path, docs, provider, model, base_url, no_auth, max_concurrency, queue_depth, workers,
    allow_hosts, access_log, graceful_timeout,
):
    """Answer questions over HTTP: POST /v1/ask streams the answer as server-sent events.

    The bearer token is read from DOCPILOT_SERVER_TOKEN. The docs and the model are
    loaded once, before the first request. SIGTERM or Ctrl-C drains: no new question is
    taken and the answers under way finish (a second signal stops at once). Exit
    status: 2 on a usage, config or input error (such as --no-auth on a public host, or
    no token).
    """
    from docpilot.extras import require_extra

    require_extra("serve", "docpilot serve (the HTTP server)")
    from docpilot import progress
    from docpilot.assistant.workspace import open_workspace
    from docpilot.config.loading import load_config
    from docpilot.models.probe import ready_endpoint
    from docpilot.models.registry import build_model, flag_overrides
    from docpilot.server.app import bind, create_app, run_server, url_of
    from docpilot.server.auth import is_loopback, server_token
    from docpilot.server.serving import default_workers

    token = server_token(host, no_auth=no_auth)  # refuse an open public server before loading anything
    config = load_config(config_path, overrides=flag_overrides(docs=docs, provider=provider, model=model, base_url=base_url))
    with progress.shown():  # on stderr: how far the build of a missing index is
        workspace = open_workspace(config, use_cache=False)
    # The model endpoint is checked (and the local provider's server started) before the
    # port opens, so a wrong key stops here rather than failing every question.
    with ready_endpoint(config) as ready:
        config = ready()
        app = create_app(
            workspace,
            build_model(config.model, corpus=workspace.corpus),
            token=token,
            max_concurrency=max_concurrency,
            queue_depth=queue_depth,
            local=is_loopback(host),
            allowed_hosts=frozenset(name.strip().lower() for name in allow_hosts),
        )
        workers = min(workers or default_workers(max_concurrency), max_concurrency)
        sockets = bind(host, port, count=workers)
        auth = "bearer token required" if token else "no auth (loopback only)"
        pages = len(workspace.corpus.pages)
        click.echo(
            f"docpilot serve: listening on {url_of(sockets[0])} ({pages} pages, model {config.model.provider}/"
            f"{config.model.name}, {auth}, at most {max_concurrency} questions at once over {workers} "
            f"worker{'s' if workers > 1 else ''}, {queue_depth} more queued)",
            err=False,
        )
        grace_s = config.server.graceful_timeout if graceful_timeout is None else graceful_timeout
        run_server(app, sockets, access_log=access_log, grace_s=grace_s)
