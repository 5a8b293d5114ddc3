"""The views services are shown, built without pydantic's validation (the agent's own data):
they must read, dump and copy exactly as views a service's server parses from JSON."""

from __future__ import annotations

from agent.connectors.http import request_body
from agent.pipeline.views import dialog_view, people, utterance_view
from agent.sdk.models import DialogView, ServiceRequest
from agent.state.models import Bot, BotUtterance, Human, HumanUtterance, Hypothesis


def _window() -> tuple[list[HumanUtterance | BotUtterance], Human, Bot]:
    human = Human(user_external_id="ann", attributes={"name": "Ann"})
    bot = Bot(attributes={"mood": "calm"})
    first = HumanUtterance(
        text="hi", user=human.model_dump(mode="json"), annotations={"tokens": ["hi"]}
    )
    answer = BotUtterance(
        text="Hello!", orig_text="Hello!", active_skill="greeting", confidence=0.9, user={}
    )
    newest = HumanUtterance(
        text="show me",
        user=human.model_dump(mode="json"),
        attributes={"image": "data:image/png;base64,AA==", "eval_labels": ["secret"]},
        annotations={"sentiment": {"label": "neutral"}},
        hypotheses=[Hypothesis(skill_name="faq", text="Here.", confidence=0.5, extra_field=1)],
    )
    return [first, answer, newest], human, bot


def test_a_view_reads_as_the_service_parses_it() -> None:
    window, human, bot = _window()
    view = dialog_view("d1", window, people(human, bot), context_window=3, max_tokens=40)
    parsed = DialogView.model_validate_json(view.model_dump_json())
    assert parsed == view
    assert parsed.model_dump() == view.model_dump()
    newest = view.human_utterance
    assert newest.image == "data:image/png;base64,AA=="
    assert "eval_labels" not in newest.attributes  # hidden from services
    assert [h.skill_name for h in newest.hypotheses] == ["faq"]
    assert view.utterances[1].active_skill == "greeting"
    assert view.human.attributes == {"name": "Ann"} and view.bot.attributes == {"mood": "calm"}


def test_a_view_without_a_budget_leaves_max_tokens_out_of_its_json() -> None:
    window, human, bot = _window()
    view = dialog_view("d1", window, people(human, bot), context_window=1)
    assert "max_tokens" not in view.model_dump_json()
    assert len(view.utterances) == 1


def test_a_view_copies_and_batches_like_a_validated_one() -> None:
    window, human, bot = _window()
    view = dialog_view("d1", window, people(human, bot), context_window=3)
    copy = view.model_copy(deep=True)
    copy.utterances[0].annotations["tokens"].append("there")
    assert view.utterances[0].annotations["tokens"] == ["hi"]
    assert view.model_dump(exclude_unset=True) == view.model_dump()
    budgeted = dialog_view("d1", window, people(human, bot), context_window=2, max_tokens=9)
    body = request_body([view, budgeted])  # what an HTTP service is sent
    assert body == ServiceRequest(dialogs=[view, budgeted]).model_dump_json().encode()
    assert ServiceRequest.model_validate_json(body).dialogs == [view, budgeted]
    assert utterance_view(window[1]).speaker == "bot"
