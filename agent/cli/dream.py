"""``chorus dream compose-block``: the compose service that runs Chorus in place of a Dream
distribution's dp-agent (docs/dream.md, "Run the agent in compose").

A distribution's ``docker-compose.override.yml`` sets variables on its ``agent`` service
(``LANGUAGE``, ``FALLBACK_FILE``, ``ENABLE_*``...). The agent does not use them itself: the
formatters and python connectors it runs in its own process read them (a Russian
distribution's fallbacks are Russian only with ``LANGUAGE: RU``). Chorus's agent runs the same
code, so it needs the same variables; this writes its block with them carried over, and with
the pipeline file the override's ``command`` names.

The override is read as untrusted input: at most ``MAX_OVERRIDE_BYTES``, and without YAML
aliases (``*name``), since one alias of an alias of... (a "billion laughs" file of a few
hundred bytes) expands to gigabytes once its values are written out. A Dream override is a
few kilobytes of plain keys, so neither limit meets one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from agent.sdk.errors import ChorusError

#: Where Dream's agent image (and ``chorus-agent-dream``) keeps the Dream checkout.
DREAM_ROOT = "/dp-agent"
#: The variables of Dream's start script (``bin/wait``), not of the agent.
START_SCRIPT_VARIABLES = frozenset({"WAIT_HOSTS", "WAIT_HOSTS_TIMEOUT"})
#: How dp-agent's command names the pipeline file (hydra's override).
PIPELINE_ARGUMENT = re.compile(r"agent\.pipeline_config=(\S+?)['\"]?(?:\s|$)")
#: Chorus's own database: a MongoDB of its own (Dream's ``mongo:4.0.0`` is older than the
#: versions Chorus is tested on), so dp-agent's collections stay as they were.
CHORUS_DB_URL = "mongodb://chorus-mongo:27017/chorus"
#: Largest override file read (Dream's are a few kilobytes).
MAX_OVERRIDE_BYTES = 1_000_000


class OverrideError(ChorusError, ValueError):
    """The override file cannot give the agent's block; the message says what to fix."""


class _NoAliases(yaml.SafeLoader):
    """YAML's safe loader, refusing aliases: what they expand to is not bounded by the
    file's size (an anchor may be used anywhere, nested in another anchor)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(
                None,
                None,
                "found an alias (*name): aliases are not read here, write the value out",
                self.get_mark(),
            )
        return super().compose_node(parent, index)


def _read(override: Path) -> Any:
    """The override's YAML, within :data:`MAX_OVERRIDE_BYTES` and without aliases."""
    try:
        with override.open("rb") as file:
            raw = file.read(MAX_OVERRIDE_BYTES + 1)
    except OSError as exc:
        raise OverrideError(f"cannot read {override}: {exc.strerror}") from None
    if len(raw) > MAX_OVERRIDE_BYTES:
        raise OverrideError(
            f"{override}: larger than {MAX_OVERRIDE_BYTES} bytes (MAX_OVERRIDE_BYTES); "
            "a distribution's override is a few kilobytes"
        )
    try:
        return yaml.load(raw.decode("utf-8"), Loader=_NoAliases)  # a SafeLoader
    except UnicodeDecodeError:
        raise OverrideError(f"{override}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise OverrideError(f"{override}: not valid YAML: {exc}") from None


def _environment(agent: dict[str, Any], where: str) -> dict[str, str | None]:
    """The agent's ``environment`` (a mapping, or compose's list of ``KEY=VALUE``) without
    the start script's variables; values as compose reads them, ``${...}`` left for it."""
    raw = agent.get("environment") or {}
    pairs: list[tuple[str, Any]]
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = []
        for item in raw:
            if not isinstance(item, str):
                raise OverrideError(
                    f"{where}: services.agent.environment: each item must be a KEY=VALUE "
                    f"string, not a {type(item).__name__}"
                )
            key, sep, value = item.partition("=")
            pairs.append((key, value if sep else None))
    else:
        raise OverrideError(f"{where}: services.agent.environment must be a mapping or a list")
    for key, value in pairs:
        if not isinstance(value, str | int | float | bool | None):
            raise OverrideError(
                f"{where}: services.agent.environment: {str(key)[:100]} must be a string, "
                f"a number or a boolean, not a {type(value).__name__}"
            )
    return {
        str(key): None if value is None else _as_text(value)
        for key, value in pairs
        if str(key) not in START_SCRIPT_VARIABLES
    }


def _type_name(value: Any) -> str:
    """What a value of the wrong type is, for the error (a list of lists, a mapping...)."""
    if isinstance(value, list):
        return "a list holding " + ", ".join(
            sorted({type(item).__name__ for item in value if not isinstance(item, str)})
        )
    return f"a {type(value).__name__}"


def _as_text(value: Any) -> str:
    if isinstance(value, bool):  # YAML's true/false; compose refuses booleans here
        return "true" if value else "false"
    return str(value)


def _pipeline(agent: dict[str, Any], override: Path) -> str:
    """The pipeline file inside the container: the one dp-agent's ``command`` names (relative
    to the Dream checkout), else the override's own folder's ``pipeline_conf.json``."""
    command = agent.get("command")
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        text = " ".join(command)
    elif isinstance(command, str | None):
        text = command or ""
    else:
        raise OverrideError(
            f"{override}: services.agent.command must be a string or a list of strings, "
            f"not {_type_name(command)}"
        )
    found = PIPELINE_ARGUMENT.search(text)
    if found:
        relative = found.group(1).removeprefix("./")
    else:
        relative = f"assistant_dists/{override.resolve().parent.name}/pipeline_conf.json"
    return relative if relative.startswith("/") else f"{DREAM_ROOT}/{relative}"


def compose_block(override: Path) -> dict[str, Any]:
    """The compose file that adds ``chorus-agent`` (answering as ``agent`` on the compose
    network) and its database to the distribution of ``override``."""
    document = _read(override)
    services = document.get("services") if isinstance(document, dict) else None
    agent = services.get("agent") if isinstance(services, dict) else None
    if not isinstance(agent, dict):
        raise OverrideError(
            f"{override}: no services.agent entry; name a distribution's "
            "docker-compose.override.yml (assistant_dists/NAME/docker-compose.override.yml)"
        )
    settings: dict[str, str | None] = {
        "CHORUS_PIPELINE": _pipeline(agent, override),
        "CHORUS_DB_URL": CHORUS_DB_URL,
        # passed on when set in the shell that runs compose; unset: open reads, as dp-agent
        "CHORUS_API_KEY": None,
    }
    carried = _environment(agent, str(override))
    env_file = agent.get("env_file") or [".env"]
    if not isinstance(env_file, str) and not (
        isinstance(env_file, list) and all(isinstance(name, str) for name in env_file)
    ):
        raise OverrideError(
            f"{override}: services.agent.env_file must be a file name or a list of them"
        )
    return {
        "services": {
            "chorus-agent": {
                "image": "chorus-agent-dream",
                "env_file": env_file if isinstance(env_file, list) else [env_file],
                "volumes": [f".:{DREAM_ROOT}"],
                "environment": settings | {k: v for k, v in carried.items() if k not in settings},
                "ports": ["127.0.0.1:4242:4242"],
                "networks": {"default": {"aliases": ["agent"]}},
                "depends_on": ["chorus-mongo"],
            },
            "chorus-mongo": {"image": "mongo:7", "volumes": ["chorus-mongo:/data/db"]},
        },
        "volumes": {"chorus-mongo": {}},
    }


def compose_block_command(
    override: Annotated[
        Path,
        typer.Option(
            metavar="FILE",
            help="The distribution's compose override, e.g. "
            "assistant_dists/dream_russian/docker-compose.override.yml.",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Write the block here (default: standard output)."),
    ] = None,
) -> None:
    """Write the compose file that runs Chorus in place of a distribution's dp-agent.

    The block carries over every variable the override sets on dp-agent's ``agent`` service
    (its formatters and connectors run in Chorus's process and read them), runs the pipeline
    file the override's command names, and answers as ``agent`` on the compose network. Run
    it in the Dream checkout and pass the file with one more ``-f`` (docs/dream.md).
    """
    try:
        block = compose_block(override)
    except OverrideError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    text = (
        f"# Chorus in place of dp-agent, for {override} (chorus dream compose-block)\n"
        + yaml.safe_dump(block, sort_keys=False, allow_unicode=True)
    )
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        typer.secho(f"wrote {output}", fg=typer.colors.GREEN, err=True)


dream_app = typer.Typer(
    help="Run a DeepPavlov Dream distribution on Chorus (docs/dream.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
dream_app.command("compose-block", short_help="Write the agent's compose block.")(
    compose_block_command
)
