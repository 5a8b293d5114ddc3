"""``chorus chat``: talk to a running agent from the terminal.

Each line is one message to ``POST /``; the answer is printed with the skill that gave it
(``bot [greeting]: Hi!``), and a line ``-- dialog <id> --`` whenever a new dialog starts.
The turn is followed as Server-Sent Events, so a streaming skill's answer (an LLM's) is
printed as it is written; should the turn end with another answer than the one streamed
(a candidate annotator held it back), the answer is printed on its own line after it.
``/new`` starts a new dialog: the chat API ends the user's open dialog when the payload is
``/start``, and the next message opens another. ``/quit`` or the end of input exits.

Piped input works as typed input does (no prompt is shown then), so a chat can be scripted.
"""

from __future__ import annotations

import getpass
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from agent.api.schemas import AgentReply
from agent.cli import address
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


@dataclass
class Turn:
    """What the chat printed of one turn so far: the dialog it is in, and the streamed text."""

    dialog: str | None
    streamed: list[str] = field(default_factory=list)
    skill: str | None = None

    def accepted(self, dialog_id: str | None) -> None:
        if dialog_id is not None and dialog_id != self.dialog:
            self.dialog = dialog_id
            console.print(f"-- dialog {dialog_id} --", style="dim")

    def token(self, text: str, skill: str | None) -> None:
        if not self.streamed:
            self.skill = skill
            console.print(_prefix(skill), end="")
        self.streamed.append(text)
        console.print(text, end="")
        console.file.flush()  # piped output too: the text shows as it is written

    def answered(self, reply: AgentReply) -> None:
        self.accepted(reply.dialog_id)
        if self.streamed:
            console.print()
            if "".join(self.streamed) == reply.response and self.skill == reply.active_skill:
                return
        show(reply)


def _refused(response: httpx.Response) -> None:
    if response.status_code in (401, 403):
        raise ChatError(
            f"the agent refused the chat ({response.status_code}): set "
            "--api-key (or CHORUS_API_KEY)"
        )


def _reply(data: Any, client: httpx.Client) -> AgentReply:
    try:
        return AgentReply.model_validate(data)
    except ValidationError:
        raise ChatError(
            f"{client.base_url} is not a Chorus agent: it answered {str(data)[:100]!r}"
        ) from None


def _events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    """The Server-Sent Events of a turn, as they arrive."""
    name = "message"
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            yield name, json.loads(line.removeprefix("data:"))
            name = "message"


def send(client: httpx.Client, user_id: str, text: str, turn: Turn) -> AgentReply | None:
    """One message, its turn followed as it runs; ``None`` when this message failed but the
    chat can go on."""
    body = {"user_id": user_id, "payload": text}
    try:
        with client.stream(
            "POST", "/", json=body, headers={"Accept": "text/event-stream"}
        ) as response:
            _refused(response)
            if not response.is_success:
                response.read()
                errors.print(f"error: {response.status_code} {response.text[:300]}", style="red")
                return None
            if "text/event-stream" not in response.headers.get("content-type", ""):
                response.read()
                try:
                    return _reply(response.json(), client)
                except ValueError:
                    return _reply(response.text, client)
            for name, data in _events(response):
                if name == "accepted":
                    turn.accepted(data.get("dialog_id"))
                elif name == "token":
                    turn.token(str(data.get("text", "")), data.get("skill"))
                elif name == "answer":
                    return _reply(data, client)
                elif name == "error":
                    if turn.streamed:
                        console.print()
                    message = data.get("message") or data.get("detail") or data
                    errors.print(f"error: {data.get('status')} {message}", style="red")
                    return None
    except httpx.TimeoutException:
        errors.print(f"error: no answer within {TIMEOUT:.0f}s; try again", style="red")
        return None
    except httpx.TransportError as exc:
        raise ChatError(f"lost the agent at {client.base_url}: {_reason(exc)}") from None
    except json.JSONDecodeError:
        raise ChatError(
            f"{client.base_url} is not a Chorus agent: its events are not JSON"
        ) from None
    errors.print("error: the turn's events ended without an answer; try again", style="red")
    return None


def _prefix(skill: str | None) -> Text:
    tag = Text(f" [{skill}]", style="cyan") if skill else ""
    return Text.assemble(("bot", "bold green"), tag, ": ")


def show(reply: AgentReply) -> None:
    console.print(Text.assemble(_prefix(reply.active_skill), reply.response))


def converse(client: httpx.Client, user_id: str, lines: Iterator[str]) -> None:
    dialog: str | None = None
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if text in QUIT:
            return
        if text == "/new":
            if send(client, user_id, NEW_DIALOG, Turn(dialog)) is not None:
                console.print("(your next message starts a new dialog)", style="dim")
            continue
        turn = Turn(dialog)
        reply = send(client, user_id, text, turn)
        dialog = turn.dialog
        if reply is not None:
            turn.answered(reply)
            dialog = turn.dialog


def check_reachable(client: httpx.Client) -> None:
    """Fail before the first message, not after the user typed it."""
    try:
        client.get("/ping")
    except httpx.TransportError as exc:
        raise ChatError(
            f"cannot reach the agent at {client.base_url}: {_reason(exc)} "
            "(is it running? `make run` starts it; --url names another)"
        ) from None


def chat_command(
    url: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="The address of the running agent (by default the one `chorus run` serves "
            "from this folder, wherever --port put it, else http://127.0.0.1:4242).",
        ),
    ] = None,
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
    url = address.agent_url(Path.cwd(), url)
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
