"""Editing docker-compose.yml as text, so its comments and layout stay: the names of its
services, and a new skill's service block and ``agent.depends_on`` entry, each after the last
skill's. Only the block-mapping layout the repository's compose file uses is read; anything
else is refused with the line to look at, and nothing is written.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from agent.sdk.errors import ChorusError

COMPOSE_FILE = Path("docker-compose.yml")


class ComposeTextError(ChorusError):
    """The compose file is not laid out as :func:`compose_with_skill` can edit it; nothing
    was changed."""


@dataclass(frozen=True, slots=True)
class _Key:
    """One key of a YAML block mapping: its line and the end of its value's lines."""

    name: str
    line: int
    end: int
    indent: int


_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):(\s|$)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_content(line: str) -> bool:
    return bool(line.strip()) and not line.strip().startswith("#")


def _children(lines: list[str], parent: int, what: str) -> list[_Key]:
    """The keys of the block mapping under ``lines[parent]``; anything else (a list, a flow
    mapping) is an error."""
    stop = next(
        (
            i
            for i in range(parent + 1, len(lines))
            if _is_content(lines[i]) and _indent(lines[i]) <= _indent(lines[parent])
        ),
        len(lines),
    )
    body = [i for i in range(parent + 1, stop) if _is_content(lines[i])]
    if not body:
        raise ComposeTextError(f"{COMPOSE_FILE}: {what} is empty")
    indent = _indent(lines[body[0]])
    starts = [i for i in body if _indent(lines[i]) == indent]
    keys = []
    for n, start in enumerate(starts):
        match = _KEY.match(lines[start])
        if match is None:
            raise ComposeTextError(
                f"{COMPOSE_FILE}:{start + 1}: expected `name:` under {what}, "
                f"found {lines[start].strip()!r}"
            )
        following = starts[n + 1] if n + 1 < len(starts) else stop
        # The value ends at its last deeper line: a comment at the key's own indent before
        # the next key (`  # skills`) introduces that key.
        end = (
            max(
                (
                    i
                    for i in range(start, following)
                    if lines[i].strip() and _indent(lines[i]) > indent
                ),
                default=start,
            )
            + 1
        )
        keys.append(_Key(match.group(2), start, end, indent))
    return keys


def _top_level(lines: list[str], key: str) -> int:
    found = next((i for i, line in enumerate(lines) if re.match(rf"^{key}:\s*(#.*)?$", line)), None)
    if found is None:
        raise ComposeTextError(f"{COMPOSE_FILE}: no top-level `{key}:`")
    return found


def compose_services(text: str) -> list[str]:
    lines = text.splitlines()
    return [key.name for key in _children(lines, _top_level(lines, "services"), "services")]


def _step(lines: list[str], key: _Key, default: int = 2) -> int:
    """How much deeper than the key its value is indented."""
    deeper = next(
        (_indent(lines[i]) for i in range(key.line + 1, key.end) if _is_content(lines[i])), None
    )
    return deeper - key.indent if deeper is not None else default


Insertion = tuple[int, list[str]]


def _service_block(lines: list[str], services: list[_Key], name: str) -> Insertion:
    """The new service, after the last skill's block, sharing the others' ``<<: *anchor``."""
    body = "\n".join(lines[services[0].line : services[-1].end])
    anchors = Counter(re.findall(r"<<:\s*\*([A-Za-z0-9_-]+)", body))
    if not anchors:
        raise ComposeTextError(
            f"{COMPOSE_FILE}: no service shares settings through "
            "`<<: *anchor`; add the service by hand (docs/deployment.md)"
        )
    skills = [
        key
        for key in services
        if re.search(r"SERVICE:\s*['\"]?skills/", "\n".join(lines[key.line : key.end]))
    ]
    after = skills[-1] if skills else services[-1]
    pad, step = " " * after.indent, " " * _step(lines, after)
    return after.end, [
        "",
        f"{pad}{name}:",
        f"{pad}{step}<<: *{anchors.most_common(1)[0][0]}",
        f"{pad}{step}build:",
        f"{pad}{step * 2}context: .",
        f"{pad}{step * 2}dockerfile: deploy/service.Dockerfile",
        f"{pad}{step * 2}args:",
        f"{pad}{step * 3}SERVICE: skills/{name}",
    ]


def _dependency(lines: list[str], services: list[_Key], name: str, skills: set[str]) -> Insertion:
    """``agent.depends_on.NAME.condition: service_healthy``, after the last skill's entry."""
    agent = next((key for key in services if key.name == "agent"), None)
    depends = (
        next(
            (key for key in _children(lines, agent.line, "agent") if key.name == "depends_on"), None
        )
        if agent
        else None
    )
    if depends is None:
        raise ComposeTextError(f"{COMPOSE_FILE}: the agent service has no `depends_on:` mapping")
    entries = _children(lines, depends.line, "agent.depends_on")
    last = ([e for e in entries if e.name in skills] or entries)[-1]
    pad = " " * last.indent
    return last.end, [f"{pad}{name}:", f"{pad}{' ' * _step(lines, last)}condition: service_healthy"]


def compose_with_skill(text: str, name: str, skills: set[str]) -> str:
    """The compose file with the skill's service block and its ``agent.depends_on`` entry,
    each after the last skill's; every other line as it was."""
    lines = text.splitlines()
    services = _children(lines, _top_level(lines, "services"), "services")
    insertions = [_service_block(lines, services, name), _dependency(lines, services, name, skills)]
    for position, new in sorted(insertions, reverse=True):  # the later first: indexes hold
        lines[position:position] = new
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")
