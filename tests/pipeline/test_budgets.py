"""Token budgets through the real agent, the LLM skill and a local OpenAI-compatible
endpoint that reports its ``usage``: the skill is told the most it may spend, and is no
longer called once a dialog's budget is spent."""

from __future__ import annotations

from typing import Any

from agent.sdk import DialogView, Service, SkillHypothesis
from skills.llm.app import LLMSettings
from skills.llm.app import create_app as llm_app
from tests.conftest import AgentFactory, service_entry
from tests.support.openai_stream import StreamingOpenAI
from tests.support.servers import serving

WORDS = ["one ", "two ", "three ", "four ", "five ", "six"]


def budget_pipeline(services: Any, model_url: str, **budget: int) -> dict[str, Any]:
    settings = LLMSettings(_env_file=None, base_url=model_url, model="test-model")
    shrug = Service("shrug")

    @shrug.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(text="I don't know.", confidence=0.1)

    return {
        "services": {
            "skills": {
                "shrug": service_entry(services(shrug.app).url),
                "llm": service_entry(
                    services(llm_app(settings)).url,
                    stream=True,
                    tier=1,
                    run_below=0.5,
                    budget=budget,
                ),
            }
        }
    }


def test_the_llm_is_told_its_per_turn_budget_and_stops_when_the_dialog_s_is_spent(
    services: Any, agent: AgentFactory
) -> None:
    model = StreamingOpenAI(WORDS)
    with serving(model.app) as endpoint:
        # each answer costs 3 tokens at most (per turn) plus its prompt's messages
        client = agent(budget_pipeline(services, f"{endpoint.url}/v1", per_turn=3, per_dialog=9))
        answers = [
            client.post("/", json={"user_id": "ann", "payload": f"Tell me {n}"}).json()
            for n in range(3)
        ]
        other = client.post("/", json={"user_id": "bob", "payload": "Tell me"}).json()
    assert [a["active_skill"] for a in answers] == ["llm", "llm", "shrug"]
    assert other["active_skill"] == "llm"  # another dialog has its own budget
    assert [body["max_tokens"] for body in model.requests] == [3, 3, 3]
    (dialog,) = client.get("/api/user/ann").json()
    spent = dialog["bot"]["attributes"]["tokens_spent"]["llm"]
    assert spent >= 9  # 2 + 3, then 4 + 3 tokens: the second call spent the budget
    last = dialog["utterances"][4]
    assert {c["service"]: c["outcome"] for c in last["trace"]}["llm"] == "skipped"


def test_a_day_s_budget_holds_across_dialogs(services: Any, agent: AgentFactory) -> None:
    model = StreamingOpenAI(WORDS)
    with serving(model.app) as endpoint:
        client = agent(budget_pipeline(services, f"{endpoint.url}/v1", per_day=10))
        answers = [
            client.post("/", json={"user_id": user, "payload": "Tell me"}).json()
            for user in ("ann", "bob", "cid")
        ]
        metrics = client.get("/metrics").text
    # ann's answer costs 2 + 6 tokens; bob may spend only the 2 left: 2 + 2; cid nothing
    assert [a["active_skill"] for a in answers] == ["llm", "llm", "shrug"]
    assert [body["max_tokens"] for body in model.requests] == [10, 2]
    assert 'chorus_skill_tokens_total{skill="llm"} 12.0' in metrics
