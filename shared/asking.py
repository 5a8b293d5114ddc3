"""Whether a turn asks something: the skills that answer questions (the FAQ, the knowledge
base) answer only those.

A question mark, or a question word among the first three words ("so what are you good
for then", "like what can u do tho", "explain how a backup works"). A statement shares
words with the docs as often as a question does ("Marek", "i failed my driving theory
test again", "ending test"), and a request for something to be made or done ("add a
docstring", "send me the last 5 dialogs as csv", "restart the smalltalk service") asks for
work, not for what the docs say: neither is answered by a passage or an FAQ entry. On the
five training sets' turns, every knowledge answer that fitted its turn asked something,
and 20 of the 43 that did not fit asked nothing (bench/journal/knowledge.md).
"""

from __future__ import annotations

import re

#: A question or a request to tell, by its question mark or a question word among its
#: first few words.
_ASKS = re.compile(
    r"\?|^\W*(?:\w+\W+){0,2}?(?:what|what's|whats|who|who's|whom|whose|why|how|when|where"
    r"|which|can|could|would|will|should|shall|is|are|am|do|does|did|tell|explain|show|list)\b",
    re.IGNORECASE,
)


def asks(text: str) -> bool:
    """Whether ``text`` asks something (:data:`_ASKS`)."""
    return _ASKS.search(text) is not None
