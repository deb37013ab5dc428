"""Which orchestrator runs an eval, and why: Prefect where there is a Prefect to report to, else inline.

``--orchestrator auto`` (the default) runs through Prefect when a run has somewhere to
show up: a Prefect API is configured (``PREFECT_API_URL`` in the environment, a
``.env`` file, ``prefect.toml``, ``pyproject.toml`` or the active Prefect profile, as
``prefect cloud login`` writes it), or the run needs Prefect (``--runner dask``, a
scheduled run). Otherwise it runs the same stage functions inline: a temporary Prefect
server would cost every run seconds and leave nothing to look at afterwards.

The choice is made without importing Prefect, so an inline run never loads it: the
places Prefect reads its settings from are read here, as files.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Choice = Literal["auto", "prefect", "inline"]

START_A_SERVER = (
    "to see runs in the Prefect UI, start `prefect server start` and set "
    "PREFECT_API_URL=http://127.0.0.1:4200/api"
)
"""How to get Prefect, for a run that went inline."""


@dataclass(frozen=True)
class Orchestration:
    """The orchestrator a run uses, the reason it was chosen, and how to get the other one."""

    orchestrator: Literal["prefect", "inline"]
    """``prefect``: stages as Prefect task runs in a flow run; ``inline``: the same functions called directly."""
    reason: str
    """Why, in a few words: ``no Prefect API is configured``, ``--runner dask``."""
    other: str
    """One line on how to run with the other orchestrator."""

    def report_fields(self) -> dict[str, str]:
        """The report's ``orchestrator``, ``orchestrator_reason`` and ``orchestrator_other``."""
        return {"orchestrator": self.orchestrator, "orchestrator_reason": self.reason,
                "orchestrator_other": self.other}


def configured_api(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> str | None:
    """Where a Prefect API URL is configured, in words (``PREFECT_API_URL``, ``profile 'local'``); None if nowhere."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    if environ.get("PREFECT_API_URL"):
        return "PREFECT_API_URL"
    if _dotenv_value(cwd / ".env", "PREFECT_API_URL"):
        return "PREFECT_API_URL in .env"
    if _table(_toml(cwd / "prefect.toml"), "api").get("url"):
        return "api.url in prefect.toml"
    if _table(_toml(cwd / "pyproject.toml"), "tool", "prefect", "api").get("url"):
        return "tool.prefect.api.url in pyproject.toml"
    profile, settings = _active_profile(environ)
    if settings.get("PREFECT_API_URL"):
        return f"Prefect profile {profile!r}"
    return None


def choose(choice: Choice = "auto", *, runner: str = "local", scheduled: bool = False,
           environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Orchestration:
    """The orchestration of a run: ``choice`` as given, or for ``auto`` the rule in the module docstring."""
    api = configured_api(environ, cwd)
    to_inline = "to run without Prefect: --orchestrator inline"
    if choice == "inline":
        return Orchestration("inline", "--orchestrator inline", _start_a_server() + " and drop --orchestrator inline")
    if choice == "prefect":
        where = f"reporting to the API of {api}" if api else "on a temporary Prefect server started for the run"
        return Orchestration("prefect", f"--orchestrator prefect, {where}", to_inline)
    if scheduled:
        return Orchestration("prefect", "a scheduled run, reporting to the Prefect server", "run `docpilot eval` "
                             "to run once without Prefect")
    if runner == "dask":
        return Orchestration("prefect", "--runner dask runs its shards as Prefect task runs",
                             "drop --runner dask to run in this process, without Prefect")
    if api:
        return Orchestration("prefect", f"a Prefect API is configured ({api})",
                             to_inline + ", or unset the API")
    return Orchestration("inline", "no Prefect API is configured", _start_a_server())


def _start_a_server() -> str:
    """How to get Prefect, said from here: an install without the prefect extra must add it first."""
    from docpilot.extras import missing_modules

    return START_A_SERVER if not missing_modules("prefect") else "install the prefect extra " \
        "(pip install 'docpilot[prefect]'), then " + START_A_SERVER


def _active_profile(environ: Mapping[str, str]) -> tuple[str, dict]:
    home = Path(environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
    data = _toml(Path(str(path).replace("$PREFECT_HOME", str(home))).expanduser())
    name = environ.get("PREFECT_PROFILE") or data.get("active")
    profiles = data.get("profiles")
    settings = profiles.get(name) if name and isinstance(profiles, dict) else None
    # No active profile, or one the file does not define: Prefect falls back to its own
    # default profile, which sets no API.
    return str(name), settings if isinstance(settings, dict) else {}


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}  # unreadable here is unreadable to Prefect too: no API from it


def _table(data: dict, *keys: str) -> dict:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def _dotenv_value(path: Path, name: str) -> str | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        key, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and key.strip() == name:
            return value.strip().strip("'\"") or None
    return None
