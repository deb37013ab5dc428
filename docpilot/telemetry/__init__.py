"""Traces of evals and served turns, sent to an OpenTelemetry collector over OTLP/HTTP.

``settings`` says whether tracing is on (the config's ``telemetry`` section or the
standard ``OTEL_EXPORTER_OTLP_*`` variables) without importing OpenTelemetry;
``runs`` lays an eval's report out as spans from the times its rows already carry,
and ``tracing`` hands them over as the run goes on;
``turns`` does the same for one question served by ``docpilot serve``; ``otlp`` turns
the laid-out spans into OpenTelemetry SDK spans and sends them; ``outbox`` is the
process of its own in which an eval's spans are laid out, made and sent. Only ``otlp``
imports OpenTelemetry, only when tracing is on, and for an eval only in that process.
"""
