"""Whether traces are sent, and where: the config's ``telemetry`` section, else the standard OTLP variables.

Deciding imports nothing of OpenTelemetry, so a run that traces nothing pays nothing.
The variables read are the exporter's own (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, ``OTEL_SERVICE_NAME``, ``OTEL_SDK_DISABLED``), read
once here so that what is used is what the message names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from docpilot.config.model import TelemetryConfig
from docpilot.extras import missing_modules

TRACES_PATH = "v1/traces"
"""Where an OTLP/HTTP collector takes spans, under its base address."""


@dataclass(frozen=True)
class Tracing:
    """Where and how spans are sent."""

    url: str
    """The collector's traces address, ``…/v1/traces``."""
    source: str
    """What set it (``telemetry.endpoint``, ``OTEL_EXPORTER_OTLP_ENDPOINT``), for messages."""
    headers: dict[str, str] = field(default_factory=dict)
    """Headers sent with every export."""
    service_name: str = "docpilot"
    """The spans' ``service.name``."""
    timeout_s: float = 10.0
    """Longest wait for the collector when an eval's spans are sent."""


def tracing_settings(config: TelemetryConfig, environ: Mapping[str, str] | None = None) -> Tracing | None:
    """Where to send spans, or None when tracing is off (the usual case: nothing set)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if config.endpoint:
        url, source = signal_url(config.endpoint), "telemetry.endpoint"
    elif env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        url, source = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        url, source = signal_url(env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip()), "OTEL_EXPORTER_OTLP_ENDPOINT"
    else:
        return None
    headers = {
        **parse_headers(env.get("OTEL_EXPORTER_OTLP_HEADERS", "")),
        **parse_headers(env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "")),
        **config.headers,
    }
    service = config.service_name or env.get("OTEL_SERVICE_NAME", "").strip() or "docpilot"
    return Tracing(url=url, source=source, headers=headers, service_name=service, timeout_s=config.timeout_s)


def unusable(tracing: Tracing) -> str | None:
    """Why spans cannot be sent from here, as one warning line; None when they can."""
    if not tracing.url.startswith(("http://", "https://")):
        return (f"warning: traces are off: {tracing.source} is {tracing.url!r}, not an http:// or https:// "
                "address; fix: set it to the collector's OTLP/HTTP address, such as http://localhost:4318")
    missing = missing_modules("telemetry")
    if missing:
        return (f"warning: traces are off: {tracing.source} is set, but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not installed; fix: pip install 'docpilot[telemetry]'")
    return None


def signal_url(base: str) -> str:
    """The traces address under a collector's base address (as the OTLP exporter builds it from the variable)."""
    trimmed = base.rstrip("/")
    return trimmed if trimmed.endswith("/" + TRACES_PATH) else f"{trimmed}/{TRACES_PATH}"


def parse_headers(text: str) -> dict[str, str]:
    """``key=value,key2=value2`` (values percent-encoded), the OTLP variables' format; malformed pairs are skipped."""
    headers = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return headers
