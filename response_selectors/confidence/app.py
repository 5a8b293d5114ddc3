"""Response selector: the most confident hypothesis, and why it won.

Ties go to the earlier skill in the pipeline order. The reason is stored on the bot
utterance (``attributes.selector_reason``).
"""

from __future__ import annotations

from agent.sdk import DialogView, Selection, Service

service = Service("confidence", description="Chooses the most confident hypothesis.")


@service.response_selector
def choose(dialog: DialogView) -> Selection:
    hypotheses = dialog.human_utterance.hypotheses
    best = max(range(len(hypotheses)), key=lambda i: (hypotheses[i].confidence, -i))
    runners_up = len(hypotheses) - 1
    return Selection(
        index=best,
        reason=f"{hypotheses[best].skill_name} had the highest confidence "
        f"({hypotheses[best].confidence:.2f}) of {runners_up + 1} hypotheses",
    )


app = service.app
