"""Whether the environment asks for traces, read without importing OpenTelemetry.

Tracing is the SDK's one optional part: the ``chorus-sdk`` wheel brings OpenTelemetry only
with its ``tracing`` extra (docs/services.md), so a service built on the SDK alone must
start and answer without it. This module is plain Python; :mod:`agent.sdk.tracing`, which
needs OpenTelemetry, is imported only once the environment names an exporter, and then its
absence is a configuration error naming the extra rather than an ImportError at start-up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent.sdk.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class TelemetryConfigError(ConfigError):
    """An ``OTEL_*`` variable asks for something this build cannot do; names the variable."""


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The exporters the environment asks for; empty means tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [
        n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()
    ]
    if not names and any(environ.get(name) for name in _ENDPOINTS):
        names = ["otlp"]
    return [name for name in names if name != "none"]


def provider_from_env(default_service_name: str) -> TracerProvider | None:
    """:func:`agent.sdk.tracing.tracer_provider_from_env`, imported only when tracing is on."""
    if not exporter_names(os.environ):
        return None
    try:
        from agent.sdk.tracing import tracer_provider_from_env
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        raise TelemetryConfigError(
            "the OTEL_* variables ask for traces, but OpenTelemetry is not installed: "
            "install the SDK with its tracing extra (pip install 'chorus-sdk[tracing]')"
        ) from exc
    return tracer_provider_from_env(default_service_name)


def set_span_attribute(name: str, value: int) -> None:
    """Note ``value`` on the current span. A span can only be current where OpenTelemetry
    is loaded (the agent's process, a traced service), so without it this does nothing and
    imports nothing."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is not None:
        trace.get_current_span().set_attribute(name, value)
