"""Traces of evals and served turns, sent to an OpenTelemetry collector over OTLP/HTTP.

``settings`` says whether tracing is on (the config's ``telemetry`` section or the
standard ``OTEL_EXPORTER_OTLP_*`` variables) without importing OpenTelemetry;
``runs`` lays an eval's report out as spans from the times its rows already carry;
``turns`` does the same for one question served by ``docpilot serve``; ``otlp`` turns
the laid-out spans into OpenTelemetry SDK spans and sends them. Only ``otlp`` imports
OpenTelemetry, and only when tracing is on.
"""
