"""DocPilot's optional parts: which extra brings the packages a feature needs, checked before the feature runs.

The core install runs an eval inline, scores and compares reports, and measures a
server over HTTP. Four features need more, each from an extra of its own:

    prefect   the eval as a Prefect flow (--orchestrator prefect, a configured Prefect
              API) and ``docpilot schedule``
    dask      --runner dask: the flow's shards on a Dask cluster (brings prefect too)
    serve     ``docpilot serve``, and ``eval --runtime server`` without a URL (which
              starts one)
    telemetry traces of evals and served turns, sent over OTLP/HTTP (checked only when
              tracing is configured; a missing one turns tracing off with a warning)

The check looks the packages up without importing them, so it costs nothing on the
path that needs none of them, and a missing one ends the command in one line that
says what to install rather than in an ImportError from deep inside.
"""

from __future__ import annotations

import importlib.util

from docpilot.errors import MissingExtraError

EXTRAS: dict[str, tuple[str, ...]] = {
    "prefect": ("prefect",),
    "dask": ("prefect", "prefect_dask", "dask", "distributed"),
    "serve": ("starlette", "uvicorn", "httptools"),
    "telemetry": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
}
"""Each extra and the modules its features import (uvloop, in ``serve`` too, is optional where it runs)."""


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here, in ``EXTRAS`` order."""
    return [name for name in EXTRAS[extra] if not _installed(name)]


def require_extra(extra: str, feature: str, *, otherwise: str | None = None) -> None:
    """Raise MissingExtraError (exit 2, one line) when ``feature`` needs modules of ``extra`` that are missing.

    ``otherwise`` is a way to do without the feature, added to the fix.
    """
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(
            f"{feature} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed; "
            f"fix: pip install 'docpilot[{extra}]'" + (f", or {otherwise}" if otherwise else "")
        )


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules, or a broken parent
        return False
