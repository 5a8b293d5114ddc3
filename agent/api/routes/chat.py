"""``POST /``: DeepPavlov Agent's chat endpoint, so its clients work unchanged."""

from __future__ import annotations

from fastapi import APIRouter

from agent.api.deps import FlowDep, IdempotencyKey, JsonBody, SettingsDep
from agent.api.limits import attributes_or_422, check_text
from agent.api.schemas import AgentMessage, AgentReply
from agent.api.security import ChatKey

router = APIRouter(tags=["chat"])


@router.post("/", dependencies=[ChatKey, JsonBody], response_model=AgentReply)
async def chat(message: AgentMessage, flow: FlowDep, settings: SettingsDep,
               key: IdempotencyKey) -> AgentReply:
    """Send the user's message; get the bot's answer and the skill that gave it.

    ``payload`` ``/start`` or ``/close`` ends the user's open dialog; the next message
    opens a new one.
    """
    check_text(message.payload, settings.max_text_length, "payload")
    attributes = attributes_or_422(message.attributes, settings.client_limits())

    async def answer() -> dict[str, object]:
        reply = await flow.handle(message.user_id, message.payload, attributes)
        return AgentReply(dialog_id=reply.dialog_id, utt_id=reply.utt_id,
                          user_id=message.reply_user_id(), response=reply.response,
                          active_skill=reply.active_skill,
                          debug_output=reply.debug).model_dump()

    message_key = key or message.message_id
    scoped = f"chat:{message_key}" if message_key else None
    return AgentReply.model_validate(
        await flow.claims.answer_once(message.user_id, scoped, message, answer))
