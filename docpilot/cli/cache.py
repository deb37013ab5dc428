"""`docpilot cache info|clear`: what the stage cache holds, and emptying it."""

from __future__ import annotations

import json

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors


@main.group("cache")
def cache_group() -> None:
    """Inspect or empty the per-record stage cache."""


def _directory(config_path: str | None) -> str:
    from docpilot.config.loading import load_config

    return load_config(config_path).cache_dir


@cache_group.command("info")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@handle_errors
def cache_info(config_path, as_json):
    """Where the cache is, how many results it holds per stage, and its size on disk."""
    from docpilot.cache import describe_cache

    info = describe_cache(_directory(config_path))
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"cache: {info['directory']}")
    for stage, count in info["entries"].items():
        click.echo(f"  {stage:<10} {count:>8} results")
    if info["foreign"]:
        click.echo(f"  foreign    {info['foreign']:>8} keys DocPilot never writes (read as misses; "
                   "`docpilot cache clear` removes them)")
    click.echo(f"  size       {info['bytes'] / 1e6:>8.1f} MB")


@cache_group.command("clear")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--stage", type=click.Choice(["retrieve", "model"]), help="Clear one stage only.")
@handle_errors
def cache_clear(config_path, stage):
    """Remove cached results (all of them, or one stage's)."""
    from docpilot.cache import clear_cache

    removed = clear_cache(_directory(config_path), stage=stage)
    click.echo(f"removed {removed} cached results" + (f" of stage {stage}" if stage else ""))
