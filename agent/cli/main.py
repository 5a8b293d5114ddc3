"""``chorus``, the command line: ``run`` the local stack, ``chat`` with a running agent, back
up and restore (``export``, ``import``), ``replay`` a candidate pipeline and compare
(``stats``), ParlAI's ``eval`` and ``export-parlai``, scaffold a service (``new``), run a
dp-agent pipeline (``dream``), build the knowledge index (``knowledge``) and a Telegram bot
(``telegram``). Each command's own module holds its work; this one only wires them."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from agent.cli import address, backup, stack
from agent.cli.chat import chat_command
from agent.cli.dream import dream_app
from agent.cli.knowledge import ensure_docs_index, knowledge_app
from agent.cli.parlai import eval_command, export_command
from agent.cli.replay.command import replay_command
from agent.cli.scaffold import new_app
from agent.cli.stats import stats_command
from agent.cli.telegram import TelegramError, run_channel
from agent.cli.telegram_settings import load_telegram_settings
from agent.kinds import load_any_pipeline
from agent.settings import SettingsError, load_settings
from agent.telemetry import root_logger_kept
from agent.turn.base import LocalService
from agent.turn.config import PipelineConfigError

app = typer.Typer(
    help="Chorus: dialogue orchestration for multi-skill chatbots.",
    no_args_is_help=True,
    add_completion=False,
    # Click's plain help: every option's help as written, no "<bool>" type column.
    rich_markup_mode=None,
)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@app.callback()
def main() -> None:
    """Chorus command line."""
    # The commands run in a checkout, whose services a pipeline may name by module
    # ("skills.greeting.app", run in the agent's process): found from the folder the
    # command runs in, as `python -m` and uvicorn find them. The installed `chorus`
    # script alone would look next to itself.
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)


# Short summaries for `chorus --help`: Click cuts a docstring's first sentence to the
# width its longest command name leaves.
app.command("eval", short_help="Replay a ParlAI dataset and score the answers.")(eval_command)
app.command("export", short_help="Back up dialogs and users as JSON Lines.")(backup.export_command)
app.command("import", short_help="Restore a backup, or dp-agent's dialogs.")(backup.import_command)
app.command("export-parlai", short_help="Write stored dialogs as a ParlAI dataset.")(export_command)
app.command("chat", short_help="Chat with a running agent in the terminal.")(chat_command)
app.command("stats", short_help="Count records, or compare experiment arms.")(stats_command)
app.command("replay", short_help="Run a candidate pipeline over stored turns.")(replay_command)
app.add_typer(new_app, name="new")
app.add_typer(dream_app, name="dream")
app.add_typer(knowledge_app, name="knowledge")


def _still_starting(service: LocalService, waited: float) -> None:
    typer.echo(
        f"  {service.name:<20} starting (no answer at {service.health_url} after "
        f"{waited:.0f}s; its process runs, so it is waited for)"
    )


@app.command()
def run(
    host: Annotated[
        str, typer.Option(metavar="ADDRESS", help="The address the agent listens on.")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            metavar="PORT",
            help="The port the agent listens on (`chorus chat` run from this folder finds "
            "it); the services' ports are those of their URLs in the pipeline file.",
        ),
    ] = 4242,
    services_only: Annotated[
        bool, typer.Option(help="Start the services only, not the agent.")
    ] = False,
) -> None:
    """Start the local stack: the services, then the agent.

    Every service of the pipeline file found in this repository is started on the port of
    its URL, then the agent, which runs those the file names by module itself. Ctrl-C
    stops everything.
    """
    root = Path.cwd()
    try:
        settings = load_settings()
        with root_logger_kept():  # the pipeline's modules may set it when imported
            pipeline = load_any_pipeline(
                settings.pipeline, turn_timeout=settings.dream_turn_timeout
            )
    except (SettingsError, PipelineConfigError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    # SIGTERM (docker stop, systemd, a supervisor) must stop the services too: by default
    # it kills this process outright, and uvicorn re-raises it after its own shutdown, so
    # the `finally` below would never run. As an exception, it unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C (SIGINT) too, whatever started the stack: a background job of a script's shell
    # inherits SIGINT ignored, and Python installs its own handler only over the default,
    # so `chorus run --services-only &` (no uvicorn of its own to catch it) never stopped.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    local = pipeline.local_services(root)
    services = list(local.startable)
    for name, reason in local.off:
        typer.secho(f"  {name:<20} off ({reason})", fg=typer.colors.BRIGHT_BLACK)
    for name, module in local.in_agent:
        typer.echo(f"  {name:<20} in the agent ({module})")
    for remote in local.elsewhere:
        typer.secho(f"not started here (must already run): {remote}", fg=typer.colors.YELLOW)
    if local.note is not None:
        typer.secho(f"{settings.pipeline}: {local.note}", fg=typer.colors.YELLOW)
    if any(name == "retrieval" for name, _ in local.in_agent) or any(
        service.name == "retrieval" for service in services
    ):
        # The shipped bot's knowledge base is docs/ (agent/cli/knowledge.py says why built).
        done = ensure_docs_index(root, Console(stderr=True))
        if done is not None:
            typer.echo(f"  {'knowledge':<20} {done}")
    if not services_only:
        address.record(root, host, port)  # for `chorus chat` (agent/cli/address.py)
    processes = []
    try:
        for service in services:
            processes.append(stack.start(service, root))
        for service, process in zip(services, processes, strict=True):
            # One service that cannot start costs only its own output, as a failing
            # service does in a turn: the agent records its calls as errors.
            try:
                stack.wait_healthy(service, process, on_slow=_still_starting)
            except RuntimeError as exc:
                typer.secho(
                    f"  {service.name:<20} not running ({exc}); the pipeline runs without it",
                    fg=typer.colors.YELLOW,
                    err=True,
                )
                continue
            typer.echo(f"  {service.name:<20} http://{service.host}:{service.port}")
        if services_only:
            typer.echo("services are up; Ctrl-C stops them")
            for process in processes:
                process.wait()
            return
        typer.echo(f"starting the agent at http://{host}:{port} ...")
        probed = "127.0.0.1" if host in ("0.0.0.0", "") else host  # any address: probe this one

        def up() -> None:
            typer.secho(
                f"Chorus agent on http://{host}:{port}  (store: {settings.db_url}; "
                f"API docs: http://{host}:{port}/docs)",
                fg=typer.colors.GREEN,
            )

        # Imported here: the served app is a second of imports that `chorus chat`,
        # `replay`, `stats` and the rest, each its own process, never use.
        from agent.api.serve import serve

        with stack.announced_when_up(f"http://{probed}:{port}/ping", up):
            serve(host, port, log_level="warning", settings=settings)
    except RuntimeError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop(processes)
        address.forget(root)


@app.command(short_help="Run a Telegram bot for a running agent.")
def telegram() -> None:
    """Run a Telegram bot for a running agent.

    It long-polls the Telegram Bot API and answers each message through the agent; the
    CHORUS_TELEGRAM_* settings configure it (docs/configuration.md). Ctrl-C stops it.
    """
    try:
        settings = load_telegram_settings()
    except SettingsError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    signal.signal(signal.SIGTERM, _terminate)
    typer.secho(
        f"Telegram bot for the agent at {settings.agent_url} (Bot API: {settings.api_url}); "
        "Ctrl-C stops it",
        fg=typer.colors.GREEN,
    )
    try:
        asyncio.run(run_channel(settings))
    except TelegramError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    app()
