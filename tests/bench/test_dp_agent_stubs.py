"""What ``bench.dp_agent``'s honesty rests on, without dp-agent (a Python 3.7 environment
from PyPI, minutes to build, is too dear for the suite): the stubs count every service
call an agent makes, and answer dp-agent's response selector with a hypothesis its
skills gave, in the shape its state manager stores as the bot utterance.
"""

from __future__ import annotations

import httpx

from bench.dp_agent import pipeline_conf
from bench.dp_agent_formatters import last_utterances
from bench.stubs import make_app


def stubs() -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=make_app(0.0))
    return httpx.AsyncClient(transport=transport, base_url="http://stubs")


async def test_the_stubs_count_each_path_s_calls() -> None:
    async with stubs() as client:
        for path in ("/annotate", "/annotate", "/skill/2"):
            assert (await client.post(path, json={"dialogs": [{}]})).status_code == 200
        assert (await client.get("/calls")).json() == {"/annotate": 2, "/skill/2": 1}


async def test_dp_agent_s_selector_gets_the_first_hypothesis_its_formatter_sent() -> None:
    hypotheses = [
        {"skill_name": "stub_skill2", "text": "answer 2", "confidence": 0.2},
        {"skill_name": "stub_skill1", "text": "answer 1", "confidence": 0.1},
    ]
    human = {"text": "hello", "annotations": {}, "hypotheses": hypotheses}
    dialog = {
        "utterances": [{"text": "earlier"}, {"text": "hi"}, human],
        "human_utterances": [{"text": "earlier"}, human],
        "bot_utterances": [{"text": "hi"}],
    }
    (payload,) = last_utterances(dialog)
    assert [u["text"] for u in payload["dialogs"][0]["utterances"]] == ["hi", "hello"]
    conf = pipeline_conf(8900)["services"]["response_selectors"]["stub_response"]
    path = conf["connector"]["url"].removeprefix("http://127.0.0.1:8900")
    async with stubs() as client:
        answer = (await client.post(path, json=payload)).json()
    assert answer == [hypotheses[0]]
