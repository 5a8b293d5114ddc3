"""``chorus chat``: talk to a running agent from the terminal.

Each line is one message to ``POST /``; the answer is printed with the skill that gave it
(``bot [greeting]: Hi!``), and a line ``-- dialog <id> --`` whenever a new dialog starts.
``/new`` starts a new dialog: the chat API ends the user's open dialog when the payload is
``/start``, and the next message opens another. ``/quit`` or the end of input exits.

Piped input works as typed input does (no prompt is shown then), so a chat can be scripted.
"""

from __future__ import annotations

import getpass
import re
import sys
from collections.abc import Iterator
from typing import Annotated

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from agent.api.schemas import AgentReply
from agent.sdk.errors import ChorusError

NEW_DIALOG = "/start"
QUIT = frozenset({"/quit", "/exit"})
TIMEOUT = 60.0

# No markup: answers and error messages may hold square brackets ("[Errno 111]").
console = Console(soft_wrap=True, highlight=False, markup=False)
errors = Console(stderr=True, soft_wrap=True, highlight=False, markup=False)
PROMPT = Text("you: ", style="bold blue")


class ChatError(ChorusError):
    """The chat cannot go on (the agent is gone, or refuses this client)."""


def default_user_id() -> str:
    """One id per login, so the agent remembers you between chats."""
    try:
        login = getpass.getuser()
    except (OSError, KeyError):  # no login name in some containers
        login = ""
    return "terminal-" + (re.sub(r"[^\w.@:+-]", "", login)[:100] or "user")


def _lines(interactive: bool) -> Iterator[str]:
    """What the user types, until end of input (Ctrl-D)."""
    if not interactive:
        yield from sys.stdin
        return
    while True:
        try:
            yield console.input(PROMPT)
        except EOFError:
            console.print()
            return


def _reason(exc: httpx.TransportError) -> str:
    return str(exc) or type(exc).__name__


def send(client: httpx.Client, user_id: str, text: str) -> AgentReply | None:
    """One message; ``None`` when this message failed but the chat can go on."""
    try:
        response = client.post("/", json={"user_id": user_id, "payload": text})
    except httpx.TimeoutException:
        errors.print(f"error: no answer within {TIMEOUT:.0f}s; try again", style="red")
        return None
    except httpx.TransportError as exc:
        raise ChatError(f"lost the agent at {client.base_url}: {_reason(exc)}") from None
    if response.status_code in (401, 403):
        raise ChatError(
            f"the agent refused the chat ({response.status_code}): set "
            "--api-key (or CHORUS_API_KEY)"
        )
    if not response.is_success:
        errors.print(f"error: {response.status_code} {response.text[:300]}", style="red")
        return None
    try:
        return AgentReply.model_validate_json(response.content)
    except ValidationError:
        raise ChatError(
            f"{client.base_url} is not a Chorus agent: it answered {response.text[:100]!r}"
        ) from None


def show(reply: AgentReply) -> None:
    skill = Text(f" [{reply.active_skill}]", style="cyan") if reply.active_skill else ""
    console.print(Text.assemble(("bot", "bold green"), skill, ": ", reply.response))


def converse(client: httpx.Client, user_id: str, lines: Iterator[str]) -> None:
    dialog: str | None = None
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if text in QUIT:
            return
        if text == "/new":
            if send(client, user_id, NEW_DIALOG) is not None:
                console.print("(your next message starts a new dialog)", style="dim")
            continue
        reply = send(client, user_id, text)
        if reply is None:
            continue
        if reply.dialog_id != dialog:
            dialog = reply.dialog_id
            console.print(f"-- dialog {dialog} --", style="dim")
        show(reply)


def check_reachable(client: httpx.Client) -> None:
    """Fail before the first message, not after the user typed it."""
    try:
        client.get("/ping")
    except httpx.TransportError as exc:
        raise ChatError(
            f"cannot reach the agent at {client.base_url}: {_reason(exc)} "
            "(is it running? `make run` starts it)"
        ) from None


def chat_command(
    url: Annotated[
        str, typer.Option(metavar="URL", help="The address of the running agent.")
    ] = "http://127.0.0.1:4242",
    user_id: Annotated[
        str | None,
        typer.Option(
            metavar="ID",
            help="Who you are to the agent, which remembers you by it (by default "
            "terminal-LOGIN, LOGIN being yours).",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="CHORUS_API_KEY",
            metavar="KEY",
            help="The agent's API key, sent as X-API-Key; needed when the agent protects "
            "its chat (CHORUS_PROTECT_CHAT).",
        ),
    ] = None,
) -> None:
    """Chat with a running agent in the terminal.

    Each answer shows the skill that gave it. /new starts a new dialog, and /quit (or
    Ctrl-D) exits. Input may be piped, to script a chat.
    """
    who = user_id or default_user_id()
    interactive = sys.stdin.isatty()
    headers = {"X-API-Key": api_key} if api_key else {}
    try:
        with httpx.Client(base_url=url, timeout=TIMEOUT, headers=headers) as client:
            check_reachable(client)
            if interactive:
                console.print(
                    f"Chatting with {url} as {who}. /new starts a new dialog, /quit exits.",
                    style="dim",
                )
            converse(client, who, _lines(interactive))
    except ChatError as exc:
        errors.print(f"error: {exc}", style="red")
        raise typer.Exit(1) from None
    except httpx.InvalidURL as exc:
        errors.print(f"error: bad --url {url!r}: {exc}", style="red")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        console.print()
