"""Loading the configuration: defaults, then the config file, then the environment, then flags.

Each layer overrides the one before. Every option a layer sets remembers where it
came from (the file and line, the environment variable, or the command line), so a
wrong value is reported where it was written. Secrets are refused in every layer:
they are read from the environment by the code that uses them and never become part
of the configuration, so they cannot reach a report.
"""

from __future__ import annotations

import copy
import difflib
import functools
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from docpilot.config.model import Config
from docpilot.config.ranges import option_range
from docpilot.errors import ConfigError, InputError
from docpilot.userfiles.intake import CONFIG_FILE, read_text
from docpilot.userfiles.userfile import (
    Problem,
    describe,
    explain,
    line_of,
    mapping_entries,
    parse_scalar,
    parse_yaml,
    raise_all,
    repeated_keys,
)

DEFAULT_PATH = Path("configs/docpilot.yaml")
"""The config file read when none is named, relative to the working directory."""

ENV_PREFIX = "DOCPILOT_"
"""Prefix of environment variables that set options: `DOCPILOT_<SECTION>__<KEY>` or `DOCPILOT_<KEY>`."""

SECRET_VARIABLES = frozenset({"DOCPILOT_API_KEY", "DOCPILOT_SERVER_TOKEN"})
"""Environment variables that hold secrets; read where they are used, never part of the configuration."""

_SECRET_KEY = re.compile(r"(?:^|_)(?:api_?key|token|password|passwd|secret|secret_key|private_key|credentials?)$")

_Key = tuple[Any, ...]


@dataclass(frozen=True)
class _Origin:
    """Where an option's value was written."""

    path: Path | None = None
    line: int | None = None
    variable: str | None = None
    value: str | None = None

    def problem(self, message: str, hint: str) -> Problem:
        if self.variable is not None:
            shown = f"={self.value!r}" if self.value is not None else ""
            message = f"environment variable {self.variable}{shown}: {message}"
            return Problem(message, f"{hint}, or unset {self.variable}")
        if self.path is not None:
            return Problem(message, hint, self.path, self.line)
        return Problem(f"command-line option: {message}", hint)


_FLAG = _Origin()


def load_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """The effective configuration: defaults < config file < environment < ``overrides``.

    With ``path`` None, ``configs/docpilot.yaml`` in the working directory is read when
    it exists. ``env`` defaults to the process environment. ``overrides`` is a nested
    mapping from command-line flags; None values (flags not given) are skipped. Any
    problem raises one ConfigError naming where each bad value was written.
    """
    # Whatever sits at the default path is read, so a pipe or a folder there is refused, not skipped.
    file = Path(path) if path is not None else (DEFAULT_PATH if os.path.lexists(DEFAULT_PATH) else None)
    file_data, file_origins, problems = _read_file(file) if file is not None else ({}, {}, [])
    env_data, env_origins, env_problems = _read_env(os.environ if env is None else env)
    flag_data = _drop_none(overrides or {})
    flag_origins = dict.fromkeys(_all_keys(flag_data), _FLAG)
    problems += env_problems
    merged: dict[Any, Any] = {}
    where: dict[_Key, _Origin] = {}
    layers = (
        (file_data, file_origins, _Origin(file) if file is not None else _FLAG),
        (env_data, env_origins, _FLAG),
        (flag_data, flag_origins, _FLAG),
    )
    for layer, layer_origins, fallback in layers:
        origin = functools.partial(_origin_of, origins=layer_origins, default=fallback)
        problems += _check_keys(layer, Config, (), origin)
        _merge(merged, layer)
        where.update(layer_origins)
    problems += _value_problems(merged, where, keys_reported=bool(problems))
    problems += _gate_problems(merged.get("gates"), where)
    problems.sort(key=lambda problem: (problem.path is None, str(problem.path), problem.line or 0))
    raise_all(problems, error=ConfigError)
    config = Config.model_validate(merged)
    raise_all(_variant_problems(config, where), error=ConfigError)
    return config


def public_config(config: Config) -> dict[str, Any]:
    """The configuration as plain JSON-ready data, for reports (it never holds secrets).

    Where traces go (``telemetry``) changes nothing a run measures, and its headers may
    name a tenant: it stays out, as does how ``docpilot serve`` stops (``server``).
    """
    return config.model_dump(mode="json", exclude={"telemetry", "server"})


def _value_problems(data: dict[Any, Any], where: Mapping[_Key, _Origin], *, keys_reported: bool) -> list[Problem]:
    """Values of the wrong type or out of range, each reported where it was written."""
    try:
        Config.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            bad_key = error["type"] in ("extra_forbidden", "invalid_key") or error["loc"][-1:] == ("[key]",)
            if bad_key and keys_reported:
                continue  # already reported by the key check, with a suggestion
            numbers = option_range(Config, error["loc"])
            message, hint = explain(error, ".".join(map(str, error["loc"])), numbers=numbers and numbers.words(),
                                    example=numbers.example() if numbers else "")
            problems.append(_origin_of(tuple(error["loc"]), where).problem(message, hint))
        return problems
    return []


def _gate_problems(gates: Any, where: Mapping[_Key, _Origin]) -> list[Problem]:
    """Gates on unknown metrics, with unreadable conditions, or with thresholds the metric cannot take.

    Checked as the config loads, so the error names the line of the gate; the metric
    registry is imported only when there are gates to check.
    """
    if not isinstance(gates, dict) or not gates:
        return []  # not a mapping: the model's validation has said so
    from docpilot.metrics.gates import check_condition

    problems = []
    for name, condition in gates.items():
        if not (isinstance(name, str) and isinstance(condition, str)):
            continue  # not text: the model's validation has said so
        if _SECRET_KEY.search(name.lower().replace("-", "_")):
            continue  # a secret: the key check has refused it
        try:
            check_condition(name, condition)
        except InputError as exc:
            message = str(exc).partition("\n  fix: ")[0]
            said = message if message.startswith("gate on") else f"gates: {message}"
            problems.append(_origin_of(("gates", name), where).problem(said, exc.hint or ""))
    return problems


def _variant_problems(config: Config, where: Mapping[_Key, _Origin]) -> list[Problem]:
    """Variants with a bad name, a key they may not override or a value the option cannot take, each where written."""
    if not config.variants:
        return []
    from docpilot.config.variants import apply, check_name, flatten, key_problem

    problems = []
    for name, overrides in config.variants.items():
        try:
            check_name(name)
        except ConfigError as exc:
            problems.append(_origin_of(("variants", name), where).problem(str(exc).split("\n")[0], exc.hint or ""))
            continue
        flat = flatten(overrides or {})
        bad = False
        for key in flat:
            problem = key_problem(key)
            if problem is not None:
                bad = True
                origin = where.get(("variants", name, key)) or _origin_of(("variants", name, *key.split(".")), where)
                problems.append(origin.problem(f"variant {name!r}: {problem[0]}", problem[1]))
        if not bad:
            try:
                apply(config, name, flat)
            except ConfigError as exc:
                problems.append(_origin_of(("variants", name), where).problem(str(exc).split("\n")[0], exc.hint or ""))
    return problems


def _read_file(path: Path) -> tuple[dict[Any, Any], dict[_Key, _Origin], list[Problem]]:
    text = read_text(path, CONFIG_FILE, error=ConfigError)
    root, data = parse_yaml(text, path, error=ConfigError) if text.strip() else (None, None)
    if root is None:
        return {}, {}, []  # an empty config file keeps every default
    if not isinstance(data, dict):
        hint = "write options as `key: value` lines, like `shard_size: 250`"
        raise ConfigError(f"holds {describe(data)}, not a mapping of options", path=path, line=line_of(root), hint=hint)
    origins: dict[_Key, _Origin] = {}
    problems = []
    pending = [(root, ())]
    while pending:
        node, prefix = pending.pop()
        for key, line in repeated_keys(node):
            dotted = ".".join((*prefix, key))
            problems.append(Problem(f"option {dotted!r} is given twice", "keep one of them", path, line))
        for key, value_node, line in mapping_entries(node):
            origins[(*prefix, key)] = _Origin(path, line)
            pending.append((value_node, (*prefix, key)))
    return data, origins, problems


def _read_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[_Key, _Origin], list[Problem]]:
    """Options set by `DOCPILOT_<SECTION>__<KEY>` and `DOCPILOT_<TOP_LEVEL_KEY>` variables."""
    data: dict[str, Any] = {}
    origins: dict[_Key, _Origin] = {}
    problems = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in SECRET_VARIABLES:
            continue
        rest = name[len(ENV_PREFIX):]
        if "__" in rest:
            keys = tuple(part.lower() for part in rest.split("__"))
        elif rest.lower() in Config.model_fields:
            keys = (rest.lower(),)
        else:
            continue  # other DOCPILOT_ variables (such as DOCPILOT_DEBUG) are not options
        secret = any(_SECRET_KEY.search(key) for key in keys)
        origin = _Origin(variable=name, value=None if secret else env[name])
        if not all(keys):
            hint = "separate section and key with exactly two underscores"
            problems.append(origin.problem("the name has an empty part", hint))
            continue
        raw = env[name]
        value = raw if _accepts_text(keys) else parse_scalar(raw)
        target = data
        for key in keys[:-1]:
            target = target.setdefault(key, {}) if isinstance(target.get(key, {}), dict) else {}
        target[keys[-1]] = value
        origins[keys] = origin
    return data, origins, problems


def _header_problems(dotted: str, key: Any, value: Any, origin: _Origin) -> list[Problem]:
    """A target's header that carries a credential must read it from the environment (``${NAME}``)."""
    name = str(key).lower().replace("-", "_")
    credential = _SECRET_KEY.search(name) or name in ("authorization", "proxy_authorization", "cookie")
    if credential and not (isinstance(value, str) and "${" in value):
        return [origin.problem(f"{dotted!r} holds a credential, and secrets do not belong in the configuration",
                               f"write it as an environment variable, such as {key}: \"${{MY_TOKEN}}\", "
                               "and export MY_TOKEN; it is read when a question is sent and never stored")]
    return []


def _check_keys(
    data: Mapping[Any, Any], model: type[BaseModel] | None, prefix: _Key, origin: Callable[[_Key], _Origin]
) -> list[Problem]:
    """Secrets anywhere, and keys the model does not have (free-form mappings such as `gates` take any key)."""
    problems = []
    for key, value in data.items():
        here = (*prefix, key)
        dotted = ".".join(map(str, here))
        if len(prefix) == 3 and prefix[0] == "targets" and prefix[2] == "headers":
            problems += _header_problems(dotted, key, value, origin(here))
            continue
        if isinstance(key, str) and _SECRET_KEY.search(key.lower().replace("-", "_")):
            variable = "DOCPILOT_SERVER_TOKEN" if "token" in key.lower() else "DOCPILOT_API_KEY"
            problems.append(origin(here).problem(
                f"{dotted!r} looks like a secret, and secrets do not belong in the configuration",
                f"remove it and set {variable} in the environment instead; it is read when needed and never stored",
            ))
            continue
        if model is None and not isinstance(key, str):
            problems.append(origin(here).problem(f"key {dotted!r} must be text", "put the key in quotes"))
            continue
        if model is not None and key not in model.model_fields:
            fields = list(model.model_fields)
            near = difflib.get_close_matches(str(key), fields, n=1, cutoff=0.5)
            section = f" of {'.'.join(map(str, prefix))}" if prefix else ""
            problems.append(origin(here).problem(
                f"unknown option {dotted!r}",
                (f"did you mean {near[0]!r}? " if near else "") + f"options{section}: {', '.join(fields)}",
            ))
            continue
        if isinstance(value, Mapping):
            field = model.model_fields[key].annotation if model is not None else None
            submodel = field if isinstance(field, type) and issubclass(field, BaseModel) else None
            problems += _check_keys(value, submodel, here, origin)
    return problems


def _origin_of(key: _Key, origins: Mapping[_Key, _Origin], default: _Origin = _FLAG) -> _Origin:
    """Where the value at ``key`` (or the nearest enclosing option) was written.

    Keys are compared as text, because YAML builds `1:` into the number 1 while its
    node, which knows the line, holds the text "1".
    """
    for end in range(len(key), 0, -1):
        found = origins.get(tuple(map(str, key[:end])))
        if found is not None:
            return found
    return default


def _accepts_text(keys: _Key) -> bool:
    """Whether the option at ``keys`` takes text, so an environment value is kept as written.

    Without this, `DOCPILOT_MODEL__NAME=1.5` would become a number and be refused.
    """
    annotation: Any = Config
    for key in keys:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and key in annotation.model_fields:
            annotation = annotation.model_fields[key].annotation
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        else:
            return False
    is_union = get_origin(annotation) in (typing.Union, types.UnionType)
    return annotation is str or (is_union and str in get_args(annotation))


def _merge(base: dict[Any, Any], layer: Mapping[Any, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(dict(value)) if isinstance(value, Mapping) else value


def _drop_none(overrides: Mapping[str, Any]) -> dict[str, Any]:
    cleaned = {}
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            value = _drop_none(value)
            if not value:
                continue
        if value is not None:
            cleaned[key] = value
    return cleaned


def _all_keys(data: Mapping[Any, Any], prefix: _Key = ()) -> list[_Key]:
    keys = []
    for key, value in data.items():
        keys.append((*prefix, key))
        if isinstance(value, Mapping):
            keys += _all_keys(value, (*prefix, key))
    return keys
