"""Variants: named sets of configuration overrides that run side by side in one eval.

A variant changes how the assistant answers (``model.*``, ``prime.*``, ``retrieval.*``,
``guard.*``) or which assistant answers (``target``, one of the config's ``targets``), never what it is measured on: the golden set, the docs, the gates, the
split and the selection are the run's, shared by every variant, so their rows pair up
record by record. The first variant is the baseline the others are tested against.

Variants come from the config file's ``variants:`` section (name → overrides, nested
or dotted keys) or from the command line, which replaces that section:
``--variant NAME=KEY=VALUE[,KEY=VALUE…]`` and ``--models extractive,local,openai:gpt-4o-mini``.
Every mistake is found here, before any model is called.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from docpilot.config.model import Config
from docpilot.errors import ConfigError

SECTIONS = ("model", "prime", "retrieval", "guard")
"""The configuration sections a variant may override."""

SHARED = {
    "golden": "the golden set", "adversarial": "the attack probes", "corpus": "the docs",
    "gates": "the gates", "reports_dir": "the reports folder", "cache_dir": "the stage cache",
    "shard_size": "the shard size", "variants": "the list of variants", "targets": "the targets' definitions",
}
"""Top-level keys every variant shares, and what they are: overriding one is refused."""

SELECTION = ("split", "id", "ids", "tag", "tags", "limit", "set")
"""Names of the run's record choice, which is a command-line option, not a setting a variant may change."""

Defaults = Callable[[str, str], dict[str, Any]]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/+-]{0,63}$")


@dataclass(frozen=True)
class Variant:
    """One named column of a run: its overrides and the configuration they give."""

    name: str
    """How rows, summaries and readouts name it."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Dotted key → value, as written (``prime.top_k: 3``); empty for the configuration as it is."""
    config: Config | None = None
    """The run's configuration with the overrides applied (and no ``variants`` of its own)."""


def flatten(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested or dotted overrides as one dotted key per value: ``{"prime": {"top_k": 3}}`` → ``{"prime.top_k": 3}``."""
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def key_problem(key: str) -> tuple[str, str] | None:
    """Why a variant may not override ``key`` (message, fix); None when it may."""
    parts = key.split(".")
    head = parts[0]
    if head in SHARED:
        return (f"a variant may not change {key!r}: every variant runs on {SHARED[head]} of the run",
                f"set {head} once for the whole run, at the top of the config file or with its flag")
    if key == "target":  # the assistant measured: one of the config's targets (checked with the other values)
        return None
    if head in SELECTION:
        return (f"a variant may not change {key!r}: every variant runs the same records",
                "choose the records for the whole run with --split, --id, --tag or --limit")
    if head not in SECTIONS:
        return (f"unknown key {key!r} in a variant",
                f"a variant overrides keys of {', '.join(SECTIONS)}, such as prime.top_k or model.provider")
    section = Config.model_fields[head].annotation
    if len(parts) != 2 or not (isinstance(section, type) and issubclass(section, BaseModel)):
        return (f"unknown key {key!r} in a variant", f"write it as {head}.OPTION, such as {head}.{_first(section)}")
    if parts[1] not in section.model_fields:
        import difflib

        near = difflib.get_close_matches(parts[1], list(section.model_fields), n=1, cutoff=0.5)
        return (f"unknown key {key!r} in a variant",
                (f"did you mean {head}.{near[0]}? " if near else "")
                + f"options of {head}: {', '.join(section.model_fields)}")
    return None


def _first(section: Any) -> str:
    return next(iter(section.model_fields)) if isinstance(section, type) and issubclass(section, BaseModel) else "x"


def apply(config: Config, name: str, overrides: Mapping[str, Any], defaults: Defaults | None = None) -> Config:
    """The run's configuration with a variant's (dotted, already checked) overrides; ConfigError names a bad value.

    ``defaults(provider, run_provider)`` gives the dotted settings a variant that names
    a provider gets unless it sets them (``models.registry.provider_defaults``: the
    local provider's model name and concurrency of 1, as ``--provider`` gives them).
    """
    data = config.model_dump(mode="json")
    data["variants"] = {}
    flat = dict(overrides)
    if defaults is not None and "model.provider" in flat:
        for key, value in defaults(flat["model.provider"], data["model"]["provider"]).items():
            flat.setdefault(key, value)
    for key, value in flat.items():
        if key == "target":
            data["target"] = value
            continue
        head, option = key.split(".")
        data[head][option] = value
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"variant {name!r}: {where}: {first['msg']} (value {first.get('input')!r})",
                          hint=f"fix the value of {where} in the variant {name!r}") from None


def resolve(config: Config, declared: Iterable[tuple[str, Mapping[str, Any]]],
            defaults: Defaults | None = None) -> list[Variant]:
    """The run's variants, each with its configuration; ConfigError on a repeated name, a bad name, key or value.

    ``declared`` is (name, overrides) in order; the first is the baseline. ``defaults`` as for ``apply``.
    """
    variants: list[Variant] = []
    seen: set[str] = set()
    for name, overrides in declared:
        check_name(name)
        if name in seen:
            raise ConfigError(f"variant {name!r} is named twice", hint="give each variant a name of its own")
        seen.add(name)
        flat = flatten(overrides or {})
        for key in flat:
            problem = key_problem(key)
            if problem is not None:
                raise ConfigError(f"variant {name!r}: {problem[0]}", hint=problem[1])
        variants.append(Variant(name, flat, apply(config, name, flat, defaults)))
    return variants


def check_name(name: str) -> None:
    """A variant name is a short word (letters, digits, ``_ . : @ / + -``): it heads a column and names a JUnit suite."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"variant name {name!r} cannot be used",
                          hint="name a variant with letters, digits and _ . : @ / + - (at most 64), such as top3")


def parse_variant_option(text: str) -> tuple[str, dict[str, Any]]:
    """One ``--variant NAME=KEY=VALUE[,KEY=VALUE…]`` (or a bare ``NAME``: the configuration as it is)."""
    from docpilot.userfiles.userfile import parse_scalar

    name, sep, rest = text.partition("=")
    name = name.strip()
    overrides: dict[str, Any] = {}
    if sep:
        for part in rest.split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"--variant {text!r}: {part!r} is not KEY=VALUE",
                                  hint="write --variant NAME=KEY=VALUE[,KEY=VALUE...], "
                                       "such as --variant top3=prime.top_k=3")
            if key.strip() in overrides:
                raise ConfigError(f"--variant {text!r}: {key.strip()!r} is given twice", hint="keep one of them")
            overrides[key.strip()] = parse_scalar(value.strip())
    return name, overrides


def declared_variants(config: Config, *, options: Iterable[str] = (),
                      models: Iterable[tuple[str, dict[str, Any]]] = ()) -> list[tuple[str, dict[str, Any]]]:
    """The run's declared variants: ``models`` (``--models``, parsed) then ``--variant`` when given, else the
    config file's section."""
    declared: list[tuple[str, dict[str, Any]]] = list(models)
    declared += [parse_variant_option(option) for option in options]
    if declared:
        return declared
    return [(name, overrides or {}) for name, overrides in config.variants.items()]
