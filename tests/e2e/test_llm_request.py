"""The default pipeline with the LLM on, against an endpoint with a strict chat template:
every request the LLM skill makes, turn after turn, is one such a server accepts.

The skill's window (pipeline.json's ``context_window``) slides once the dialog is longer
than it; a window of an even length then begins with the bot's line, which a strict
template (vLLM's or llama.cpp's Llama, Mistral, Gemma) refuses with a 400, and the LLM's
answer was lost on every turn from there on.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi import FastAPI

from tests.conftest import AgentFactory
from tests.e2e.test_default_pipeline import say, shipped_pipeline
from tests.support.servers import ServerThread, serving
from tests.support.strict_chat import StrictChat

#: Questions no rule skill answers: the LLM's turns.
QUESTIONS = [
    "Explain why the sky is blue.",
    "And why are sunsets red then?",
    "How do clouds float if water is heavy?",
    "Why does thunder come after lightning?",
    "What makes a rainbow round?",
    "Could the sky be green on another planet?",
]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_llm_request_begins_with_system_then_user_as_the_window_slides(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from skills.llm.app import LLMSettings, create_app

    strict = StrictChat()
    with serving(strict.app) as endpoint:
        base_url = f"{endpoint.url}/v1"
        monkeypatch.setenv("LLM_BASE_URL", base_url)  # the agent turns the skill on
        llm = create_app(LLMSettings(_env_file=None, base_url=base_url, model="test-model"))
        pipeline = shipped_pipeline(services, apps={"llm": llm})
        # An even window is the one that begins with the bot's line once it slides,
        # whatever window pipeline.json ships.
        pipeline["services"]["skills"]["llm"]["context_window"] = 6
        client = agent(pipeline)
        answers = [say(client, text, user="sky") for text in QUESTIONS]

    assert len(strict.requests) == len(QUESTIONS), [a["active_skill"] for a in answers]
    assert not strict.refused, strict.refused[0]["messages"]
    # the window did slide: the latest requests leave the dialog's first lines out
    assert QUESTIONS[0] not in str(strict.requests[-1]["messages"])
    (dialog,) = client.get("/api/user/sky").json()
    errors = [u["errors"] for u in dialog["utterances"] if u["speaker"] == "human"]
    assert not [e for e in errors if any("llm" in str(error) for error in e)], errors
    assert [a["response"] for a in answers if a["active_skill"] == "llm"], answers
