"""Reading a turn's Server-Sent Events the way a client does: over HTTP, as they come."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

Event = tuple[str, dict[str, Any]]


def parse_sse(lines: list[str]) -> list[Event]:
    """The events of an SSE body's lines (``event:`` and one ``data:`` line each)."""
    events: list[Event] = []
    name, data = "message", ""
    for line in lines:
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data += line.removeprefix("data:").strip()
        elif not line and data:
            events.append((name, json.loads(data)))
            name, data = "message", ""
    return events


def follow(
    client: httpx.Client, path: str, body: dict[str, Any], **headers: str
) -> tuple[httpx.Response, list[Event]]:
    """POST ``body`` asking for events; the response and the events read line by line."""
    with client.stream(
        "POST", path, json=body, headers={"Accept": "text/event-stream", **headers}
    ) as response:
        lines = [*response.iter_lines()]
    return response, parse_sse([*lines, ""])


def names(events: list[Event]) -> list[str]:
    return [name for name, _ in events]


def events_of(lines: Iterator[str]) -> Iterator[Event]:
    """The events of a stream being read, each as soon as its blank line comes."""
    name, data = "message", ""
    for line in lines:
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data += line.removeprefix("data:").strip()
        elif not line and data:
            yield name, json.loads(data)
            name, data = "message", ""
