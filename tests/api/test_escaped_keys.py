"""Attribute keys that JSON must escape, merged turn after turn through the agent over HTTP.

SQLite's JSON path never matched such a key's stored (escaped) spelling, so every merge
appended another copy of it: a user's row grew by the value's size on every turn while
reads, taking the last copy, looked right. Each key must replace its old value instead,
on both stores.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.conftest import AgentFactory, service_entry
from tests.support.servers import ServerThread

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores

Services = Callable[[FastAPI], ServerThread]
#: Keys whose JSON spelling is not their own text (a backslash, a tab, a newline, control
#: characters), and a non-ASCII one for company.
ESCAPED_KEYS = ["k\\", "tab\there", "line\nbreak", "\x01\x1f", "ключ\\n", "é"]
LONG = 20_000


def turn_counting_skill() -> FastAPI:
    """Sets every key of :data:`ESCAPED_KEYS` (a long string under the first) to a value
    naming the turn, in the user's and in the bot's attributes."""
    app = FastAPI()
    turns = count(1)

    @app.post("/respond")
    async def respond(request: Request) -> JSONResponse:
        answers = []
        for _ in (await request.json())["dialogs"]:
            n = next(turns)
            attributes: dict[str, Any] = {key: f"turn {n}" for key in ESCAPED_KEYS}
            attributes["k\\"] = f"{n:04d}" + "x" * LONG
            answers.append(
                [
                    {
                        "text": f"answer {n}",
                        "confidence": 0.9,
                        "human_attributes": attributes,
                        "bot_attributes": attributes,
                    }
                ]
            )
        return JSONResponse(answers)

    return app


def sizes(db_url: str, user: str) -> tuple[int, int]:
    """The user's row and their open dialog's row, as stored in the SQLite file."""
    path = Path(db_url.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as db:
        user_size, human_id = db.execute(
            "SELECT length(doc), id FROM users WHERE user_id = ?", [user]
        ).fetchone()
        (dialog_size,) = db.execute(
            "SELECT length(doc) FROM dialogs WHERE human_id = ? AND active = 1", [human_id]
        ).fetchone()
    return int(user_size), int(dialog_size)


def say(client: httpx.Client, text: str) -> None:
    response = client.post("/", json={"user_id": "alice", "payload": text})
    assert response.status_code == 200, response.text


def test_an_escaped_key_replaces_its_value_every_turn(
    services: Services, agent: AgentFactory, db_url: str
) -> None:
    skill = services(turn_counting_skill())
    client = agent({"services": {"skills": {"s": service_entry(skill.url)}}})
    say(client, "one")
    say(client, "two")
    stored = sizes(db_url, "alice") if db_url.startswith("sqlite") else None
    for n in range(3, 7):
        say(client, f"turn {n}")
    if stored is not None:  # the rows stay as large as after two turns
        assert sizes(db_url, "alice") == stored
    dialogs = client.get("/api/user/alice")
    assert dialogs.status_code == 200, dialogs.text
    dialog = dialogs.json()[-1]
    for attributes in (dialog["human"]["attributes"], dialog["bot"]["attributes"]):
        assert attributes == {
            **{key: "turn 6" for key in ESCAPED_KEYS},
            "k\\": "0006" + "x" * LONG,
        }
