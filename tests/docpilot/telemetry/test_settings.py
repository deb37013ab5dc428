"""Whether tracing is on and where spans go: the config's telemetry section, the OTLP variables, their checks."""

from __future__ import annotations

import pytest

from docpilot.config.loading import load_config, public_config
from docpilot.config.model import Config, TelemetryConfig
from docpilot.errors import ConfigError
from docpilot.telemetry.settings import parse_headers, signal_url, tracing_settings, unusable


def test_nothing_set_means_no_tracing():
    assert tracing_settings(TelemetryConfig(), {}) is None


def test_the_standard_variable_is_a_base_address_and_the_traces_path_goes_under_it():
    tracing = tracing_settings(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert tracing is not None
    assert (tracing.url, tracing.source, tracing.service_name) == (
        "http://collector:4318/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT", "docpilot")


def test_the_traces_variable_is_used_as_it_is_and_wins_over_the_base():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9/in"}
    assert tracing_settings(TelemetryConfig(), env).url == "http://b:9/in"


def test_the_config_wins_over_the_variables_and_its_headers_over_theirs():
    config = TelemetryConfig(endpoint="https://api.honeycomb.io", headers={"x-honeycomb-dataset": "docs"},
                             service_name="docs-bot", timeout_s=3)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SERVICE_NAME": "other",
           "OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=k%3D1,x-honeycomb-dataset=old"}
    tracing = tracing_settings(config, env)
    assert tracing.url == "https://api.honeycomb.io/v1/traces"
    assert tracing.headers == {"x-honeycomb-team": "k=1", "x-honeycomb-dataset": "docs"}
    assert (tracing.service_name, tracing.timeout_s, tracing.source) == ("docs-bot", 3, "telemetry.endpoint")


def test_sdk_disabled_turns_tracing_off():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"}
    assert tracing_settings(TelemetryConfig(), env) is None


def test_headers_and_addresses_are_read_as_the_exporter_reads_them():
    assert parse_headers("a=1, B = two%20words,broken,=x") == {"a": "1", "b": "two words"}
    assert signal_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"


def test_a_variable_that_is_no_address_turns_tracing_off_with_one_line():
    tracing = tracing_settings(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})
    problem = unusable(tracing)
    assert problem is not None and "\n" not in problem
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in problem and "http://localhost:4318" in problem


def test_a_config_endpoint_that_is_no_address_is_refused_where_it_was_written(tmp_path):
    path = tmp_path / "docpilot.yaml"
    path.write_text("telemetry:\n  endpoint: localhost:4318\n")
    with pytest.raises(ConfigError) as error:
        load_config(str(path))
    assert "telemetry.endpoint" in str(error.value) and "docpilot.yaml" in str(error.value)


def test_an_unknown_telemetry_key_is_refused(tmp_path):
    path = tmp_path / "docpilot.yaml"
    path.write_text("telemetry:\n  endpont: http://localhost:4318\n")
    with pytest.raises(ConfigError) as error:
        load_config(str(path))
    assert "endpont" in str(error.value)


def test_the_report_leaves_the_telemetry_section_out():
    config = Config(telemetry=TelemetryConfig(endpoint="http://c:4318", headers={"x-tenant": "a"}))
    assert "telemetry" not in public_config(config)
