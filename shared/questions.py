"""Whether a turn asks something outright, by its words alone: a module with no model and no
package beyond the standard library, so that the lightest services (the fallback) read a
question as small talk does. :mod:`shared.asking` reads it as typed and read carefully."""

from __future__ import annotations

import re

#: "am" as it asks: before its subject ("am i late"). Without one it is chat's "I am" with
#: the "I" left out ("am good bro", "am bricking it"), a statement. Every reader of
#: questions (here, :mod:`shared.asking`, small talk's ``asks``) takes it from here.
AM_ASKING = r"am(?=\s+i\b)"

#: A question or a bid opening the turn, or its question mark at the end: what the user
#: wants is an answer, not a reply to their mood (small talk) nor an invitation to go on
#: (the fallback). Stricter than :func:`shared.asking.asks`: a question word must open the turn, a
#: clause after a comma, or follow a few words that only lead into it.
QUESTION_OR_BID = re.compile(
    r"\?\s*$|^\W*(?:what|who|whom|whose|why|how|when|where|which|can|could|would|will|should"
    # the same words typed carelessly, for a reader that reads the text as typed alone
    r"|whats|wats|wat|hows|whos|wheres|whys"
    rf"|shall|is|are|{AM_ASKING}|was|were|do|does|did|have|has|tell|give|help|explain|make"
    r"|write"
    r"|recommend|suggest|show|list|find|teach)\b"
    # a question after a clause of its own: "my tomato plants have yellow leaves, whats wrong"
    r"|[,;:]\s*(?:what|what's|whats|why|how|is|are|should|can|could|do|does)\s+\w+\s+\w+"
    # a question tagged on at the end: "my monstera leaves keep going yellow, why", "my
    # toddler wont sleep past 5am any tips"
    r"|[,;:.!]\s*(?:but\s+)?(?:why|how\s+come)\W*$"
    r"|(?:^\W*|[,;:.!]\s*|\s)(?:any|got\s+any)\s+(?:good\s+)?"
    r"(?:tips|ideas|advice|suggestions|recommendations|recs)\W*$"
    # a question after a few words that only lead into it: "be honest is taylor swift
    # overrated", "ok so what do you do", "haha how did you know"
    r"|^\W*(?:(?:ok|okay|so|and|but|also|btw|lol|haha+|hmm+|well|right|oh|wait|hey|um+|uh+"
    r"|anyway|then|honestly|seriously|real\s+talk|be\s+honest|(?:quick|random)\s+question)\W+){1,3}"
    r"(?:(?:what|what's|whats|who|why|how|when|where|which)\b(?!\s+an?\b)"
    r"|(?:is|are|was|were|can|could|would|will|should|do|does|did)\s+\w+\s+\w+)",
    re.IGNORECASE,
)


def asks_as_typed(text: str) -> bool:
    """Whether ``text`` holds a question mark, or opens as a question or a bid
    (:data:`QUESTION_OR_BID`), as typed."""
    return "?" in text or QUESTION_OR_BID.search(text) is not None
