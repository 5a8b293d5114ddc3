"""Small talk in the bot's own voice: how are you, what do you like, favourite things, bye.

Who the bot is comes from a persona (name, description, where it lives, likes, hobbies,
favourite things, and the templates of its lines). The persona belongs to the bot, so it
lives in the bot's attributes: when they hold none yet, the skill answers with the shipped
``persona.json`` and hands it back as ``bot_attributes={"persona": ...}``, which the agent
stores if this answer is chosen. A deployment customises its bot by putting a (partial)
persona in the bot's attributes or ``bot.persona``: its keys replace the file's, template by
template (:mod:`skills.smalltalk.persona`).

What the user said is recognised from ``annotations["intents"]`` when an intents annotator
ran (how_are_you, thanks, farewell, bot_identity, abilities) and from the skill's own
patterns, which also cover likes, hobbies, home and favourite things. With nothing matched,
a negative ``annotations["sentiment"]`` gets an empathetic line. The skill never repeats a
line the bot already said in the window when the template has another one.

A joke is told when asked for (:mod:`skills.smalltalk.jokes`), before anything else. With
no pattern matched, an opinion asked on a thing or a thing the user likes
(:mod:`skills.smalltalk.things`) gets a line that names it, good news about the user a glad
one; a corpus line or a persona topic beats these.

Anything else is looked up in an open dialog corpus (:mod:`skills.smalltalk.corpus`: the
English ``chatterbot-corpus``: food, books, films, feelings, ...): the answer of the
closest statement, scored by its similarity. Only when the corpus has nothing close does a
negative mood get the empathetic line.

When nothing of the skill's own answers, the turn's reading (:mod:`shared.reading`) may:
sure the turn is small talk's, with the intents annotator's intent one of small talk's,
the persona's line for that intent answers (:func:`by_reading`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Literal, cast

from agent.sdk import DialogView, Service, SkillHypothesis
from shared import reading, spelling
from shared.asking import asks_something, on_its_own_life
from shared.calibration import calibrated
from shared.jokes import is_joke
from skills.smalltalk import asks, jokes, topics, unread
from skills.smalltalk.corpus import THRESHOLD, CorpusIndex, build_index
from skills.smalltalk.lines import Match, Topic, pick, render
from skills.smalltalk.matchers import (
    INTENT_TOPICS,
    WEAK_TOPICS,
    goodbye_also,
    mood,
    nods_by_reading,
    replies_to_own_question,
    stated_line,
    states_after_name_question,
    states_by_reading,
    tells_of_their_own,
    understand,
)
from skills.smalltalk.persona import Persona, persona_of
from skills.smalltalk.thread import (
    AFTER_LLM,
    AFTER_LLM_APART,
    FEELINGS,
    states_a_feeling,
    thread_of,
)

#: A joke asked for ("Tell me a joke", or "Another one?" after one): as sure as an intent
#: and a pattern agreeing.
JOKE_CONFIDENCE = 0.85
#: A corpus answer scores from CORPUS_BASE (similarity at the threshold) to
#: CORPUS_BASE + CORPUS_SPAN (an exact match): a close match beats an intent-only guess
#: at a persona line, a pattern that covers the utterance beats a loose match; above the
#: fallback's 0.1 and below the FAQ's confident answers.
CORPUS_BASE, CORPUS_SPAN = 0.5, 0.35
#: A persona topic found by meaning (:mod:`skills.smalltalk.topics`) scores like a corpus
#: answer: from TOPIC_BASE at the threshold to TOPIC_BASE + TOPIC_SPAN for an example's twin.
TOPIC_BASE, TOPIC_SPAN = 0.55, 0.3


class SmallTalkHypothesis(SkillHypothesis):
    """A hypothesis that says which smalltalk topic it answers."""

    smalltalk_topic: Topic
    #: the topic was read by likeness only (:func:`skills.smalltalk.matchers.closer_by_likeness`)
    by_likeness: bool = False
    #: the topic was read from the annotator's intent by similarity alone
    by_similarity: bool = False


class JokeHypothesis(SkillHypothesis):
    """A joke of :mod:`skills.smalltalk.jokes`."""

    smalltalk_topic: Literal["joke"] = "joke"


#: The intents annotator's reading of a yes: its sure intent (0.7, the selector's floor),
#: or the intent the reply is most like from this likeness ("yeah go on then").
SURE_YES, YES_LIKENESS = 0.7, 0.5


def agrees(annotations: Mapping[str, Any]) -> bool:
    """The user says yes, as the intents annotator reads it (the one reading of an intent
    that the selector and the skills share)."""
    intents = annotations.get("intents")
    if not isinstance(intents, Mapping):
        return False
    if intents.get("intent") == "yes":
        return float(intents.get("confidence") or 0.0) >= SURE_YES
    return intents.get("nearest") == "yes" and float(intents.get("likeness") or 0.0) >= (
        YES_LIKENESS
    )


def says_goodbye(annotations: Mapping[str, Any]) -> bool:
    """The intents annotator is sure the user says goodbye ("aight im out, later"; a whole
    pattern's reading, not a part's), or sure of another intent with a goodbye beside it
    ("thanks, bye" reads as thanks, a farewell also): right after a joke that is no
    reaction to it, whatever its few words."""
    sure = reading.sure_intent(annotations)
    note = annotations.get("intents")
    return sure == "farewell" or (
        sure is not None and isinstance(note, Mapping) and goodbye_also(note)
    )


def tells_bad_news(text: str, annotations: Mapping[str, Any]) -> bool:
    """The user tells bad news of their own ("my dog died last week"), with no laugh in it:
    a few words right after a joke, as a laugh is, but no reaction to it; they got "Ha! Want
    another one?", and get small talk's sympathy now."""
    return (
        not jokes.LAUGHTER.search(text)
        and tells_of_their_own(text)
        and mood(annotations) == "negative"
    )


def tell_joke(dialog: DialogView, persona: Persona, said: list[str]) -> SkillHypothesis | None:
    """A joke not told lately when the user asks for one (or for more after one, or says
    yes to the offer of another); the offer of another when they laugh at one."""
    typed = dialog.human_utterance.text
    text = spelling.normalise(typed)
    earlier = [u.text for u in dialog.utterances[:-1] if u.speaker == "bot"]
    offers = joke_offers(persona)
    humans = [u.text for u in dialog.utterances[:-1] if u.speaker == "human"]
    yes = agrees(dialog.human_utterance.annotations)
    lately = jokes.asked_lately(
        [spelling.unabbreviate(line) for line in humans[-jokes.ASKED_WITHIN :]]
    )
    # read as typed too: the speller takes chat shorthand it does not know for a word
    # ("say smth funny" reads "say smith funny")
    if any(
        jokes.wanted(said, earlier, offers, yes, lately)
        for said in dict.fromkeys((text, spelling.unabbreviate(typed)))
    ):
        seed = f"{dialog.dialog_id}:{dialog.human_utterance.utt_id}"
        return JokeHypothesis(text=jokes.pick(said, seed), confidence=JOKE_CONFIDENCE)
    annotations = dialog.human_utterance.annotations
    if (
        jokes.laughs(text, earlier)
        and not says_goodbye(annotations)
        and not tells_bad_news(text, annotations)
    ):
        line = pick(offers, said)
        if line is not None:
            return SmallTalkHypothesis(
                text=line, confidence=JOKE_CONFIDENCE, smalltalk_topic="laughed"
            )
    return None


def asks_after_joke(dialog: DialogView) -> bool:
    """Whether the user, right after the bot's joke, says it was not understood or asks
    for something else (:func:`jokes.asks_after_a_joke`): no line of small talk's answers
    that, neither its matchers' nor the reading's ("i dont get it lol" got sympathy)."""
    earlier = [u.text for u in dialog.utterances[:-1] if u.speaker == "bot"]
    return jokes.asks_after_a_joke(spelling.unabbreviate(dialog.human_utterance.text), earlier)


def joke_offers(persona: Persona) -> list[str]:
    """The persona's offers of another joke (its ``laughed`` lines)."""
    return render(persona, Match("laughed", JOKE_CONFIDENCE))


def after_a_joke(dialog: DialogView, persona: Persona) -> bool:
    """Whether the bot's last line was a joke or its offer of another: there "another
    football one" asks for a joke of a kind."""
    last = dialog.bot_utterance
    return last is not None and (is_joke(last.text) or last.text in joke_offers(persona))


class CorpusHypothesis(SkillHypothesis):
    """A hypothesis from the corpus: which statement it answers, from which topic file."""

    smalltalk_topic: Literal["corpus"] = "corpus"
    corpus_statement: str
    corpus_category: str
    similarity: float


CORPUS: CorpusIndex = build_index()


def from_corpus(dialog: DialogView, said: list[str]) -> CorpusHypothesis | None:
    """The closest corpus statement's answer; among several, one not said lately, varied
    per dialog and turn (seeded, so a replay gives the same answers)."""
    found = CORPUS.best(spelling.normalise(dialog.human_utterance.text))
    if found is None:
        return None
    entry, similarity = found
    fresh = [a for a in entry.answers if a not in said] or entry.answers
    seed = f"{dialog.dialog_id}:{dialog.human_utterance.utt_id}"
    text = random.Random(seed).choice(fresh)
    share = (similarity - THRESHOLD) / (1.0 - THRESHOLD)
    return CorpusHypothesis(
        text=text,
        confidence=round(CORPUS_BASE + CORPUS_SPAN * min(1.0, share), 3),
        corpus_statement=entry.statement,
        corpus_category=entry.category,
        similarity=round(similarity, 3),
    )


class TopicHypothesis(SkillHypothesis):
    """A hypothesis on one of the persona's everyday topics, found by meaning."""

    smalltalk_topic: Literal["topic"] = "topic"
    topic: str
    similarity: float


def from_topics(dialog: DialogView, persona: Persona, said: list[str]) -> TopicHypothesis | None:
    """The persona's line on the topic closest in meaning, one not said lately."""
    typed = dialog.human_utterance.text
    asked = asks_something(typed) or unread.bids(typed)
    found = topics.closest(
        spelling.normalise(typed),
        persona.topics,
        topics.ASKED_FROM if asked else topics.THRESHOLD,
    )
    if found is None:
        return None
    name, similarity = found
    share = (similarity - topics.THRESHOLD) / (1.0 - topics.THRESHOLD)
    confidence = round(TOPIC_BASE + TOPIC_SPAN * min(1.0, share), 3)
    return on_topic(persona, name, similarity, confidence, said)


def on_topic(
    persona: Persona, name: str, similarity: float, confidence: float, said: list[str]
) -> TopicHypothesis | None:
    """A line of the persona's topic ``name`` not said lately, found at ``similarity``;
    None when every line was."""
    text = pick(persona.topics[name].lines, said)
    if text is None:
        return None
    return TopicHypothesis(
        text=text, confidence=confidence, topic=name, similarity=round(similarity, 3)
    )


#: The bot attribute with the lines this skill said last, so a line does not come back
#: while the dialog has moved past the window the skill is sent; and how many it keeps.
RECENT = "smalltalk_recent"
RECENT_KEPT = 20


def recently_said(dialog: DialogView) -> list[str]:
    """What this skill said lately and what the bot said in the window, oldest first, each
    line once (at its latest place)."""
    kept = dialog.bot.attributes.get(RECENT)
    earlier = [line for line in kept if isinstance(line, str)] if isinstance(kept, list) else []
    lines = earlier + [u.text for u in dialog.utterances if u.speaker == "bot"]
    return list(reversed(dict.fromkeys(reversed(lines))))


#: The answer types read by likeness or from the mood, not by a matcher that says what it
#: read: they give way on a turn that asks for what no small-talk line holds
#: (:mod:`skills.smalltalk.asks`). A pattern's topic, a joke asked for, thanks and
#: goodbyes keep their answer there.
LOOSE_TOPICS: frozenset[str] = WEAK_TOPICS | {"laughed", "unread", "reaction"}


def loose(chosen: SkillHypothesis, answer_type: str) -> bool:
    """Whether ``chosen`` (of ``answer_type``) was found by likeness or from the mood: a
    corpus line, a persona topic, an intent read by similarity or likeness, a joke on a
    subject (the shipped jokes have none), a guess from the mood."""
    return (
        isinstance(chosen, CorpusHypothesis | TopicHypothesis)
        or getattr(chosen, "by_likeness", False)
        or getattr(chosen, "by_similarity", False)
        or answer_type == "joke_on_a_subject"
        or str(getattr(chosen, "smalltalk_topic", "")) in LOOSE_TOPICS
    )


def gives_way(
    chosen: SkillHypothesis, answer_type: str, beyond: asks.Beyond | None, persona: Persona
) -> bool:
    """Whether ``chosen`` is left out because the turn asks for what small talk has no
    line for (``beyond``): any answer to a turn that gives the user's name (the
    greeting's), to a question on the user's own past (memory) or one
    setting the bot beside something else ("How are you different from a search
    engine?" is no "how are you"), a loose answer to the rest. A persona topic whose own
    examples are requests ("tell me a fun fact") still answers a request, and a question
    on the LLM's answer ("got another fact?")."""
    if beyond is None:
        return False
    if beyond in ("asks_own_past", "compares", "introduces"):
        return True
    if (
        beyond in ("requests", "follows_up")
        and isinstance(chosen, TopicHypothesis)
        and chosen.topic in persona.topics
        and any(asks.requests(e) for e in persona.topics[chosen.topic].examples)
    ):
        return False
    return loose(chosen, answer_type)


def respond(dialog: DialogView) -> SkillHypothesis | None:
    persona, store = persona_of(dialog.bot)
    said = recently_said(dialog)
    # "i dont get it lol" right after a joke: no line of small talk's, by the reading neither
    puzzled = asks_after_joke(dialog)
    chosen = _respond(dialog, persona, store, said, puzzled)
    text = spelling.normalise(dialog.human_utterance.text)
    thread = thread_of(dialog, persona)
    beyond = asks.beyond_small_talk(text, after_llm=thread)
    if chosen is not None:
        # the confidence as the chance that such an answer fits (shared/calibration.py)
        answer_type = str(getattr(chosen, "smalltalk_topic", ""))
        if answer_type == "joke" and jokes.on_a_subject(text, after_a_joke(dialog, persona)):
            answer_type = "joke_on_a_subject"  # the shipped jokes seldom fit one
        if getattr(chosen, "by_likeness", False):
            answer_type = f"{answer_type}_by_likeness"
        elif getattr(chosen, "by_similarity", False):
            answer_type = f"{answer_type}_by_similarity"
        if isinstance(chosen, CorpusHypothesis):
            # a line of the bot's profile fits a question about the bot better than a
            # line of the science file fits a question of fact: one curve per file
            answer_type = f"corpus:{chosen.corpus_category}"
        if (
            answer_type in AFTER_LLM_APART
            and thread
            and not (answer_type in FEELINGS and states_a_feeling(text))
        ):
            # a guess from the mood on the LLM's thread: the user may be carrying on what
            # it was asked ("we were together four years"), calibrated apart; a feeling
            # the user states ("im so stressed about this exam") is small talk's there too
            answer_type = f"{answer_type}{AFTER_LLM}"
        if gives_way(chosen, answer_type, beyond, persona):
            return None  # a question of fact, a task, memory: the LLM's (or the fallback's)
        annotations = dialog.human_utterance.annotations
        if answer_type.endswith(AFTER_LLM) and not reading.stands_on_thread(
            "smalltalk", reading.of(annotations), reading.shipped()
        ):
            return None  # a guess on the LLM's thread the reading finds no surer than its
        chosen = calibrated(chosen, "smalltalk", answer_type, annotations)
    if chosen is None and beyond is None and not puzzled:
        # own matcher silent: the reading may still say
        chosen = by_reading(dialog, persona, store, said, thread)
    if chosen is not None:  # remembered only if this answer is the one the bot gives
        recent = [line for line in said if line != chosen.text][-(RECENT_KEPT - 1) :]
        chosen.bot_attributes = {**chosen.bot_attributes, RECENT: [*recent, chosen.text]}
    return chosen


def by_reading(
    dialog: DialogView, persona: Persona, store: bool, said: list[str], thread: bool = False
) -> SkillHypothesis | None:
    """The persona's line for the intent the intents annotator reads (sure, or nearest),
    when the turn's reading is sure the turn is small talk's and that intent is one of
    its own (:func:`shared.reading.answer_by_reading`): "Are you a man or a machine?" is
    most like the bot-identity examples without a sure intent, and no pattern of this
    skill knows it. The confidence is the reading's probability, already a chance fitted
    on labelled turns (no curve of its own: the curves are fitted without the reading);
    ``routing`` says so for the inspector (``kind`` ``by_reading``)."""
    annotations = dialog.human_utterance.annotations
    intents = annotations.get("intents")
    last = dialog.bot_utterance
    question = asks_something(dialog.human_utterance.text)
    found = reading.answer_by_reading(
        "smalltalk",
        reading.of(annotations),
        intents if isinstance(intents, Mapping) else {},
        reading.shipped(),
        question=question,
        # a reply to one of small talk's guesses on the LLM's thread is the LLM's thread
        replying=last is not None
        and not thread
        and replies_to_own_question(dialog.human_utterance.text, last.text, last.active_skill),
        nodding=last is not None
        and nods_by_reading(dialog.human_utterance.text, last.active_skill, last.text),
        stating=last is not None
        and states_by_reading(dialog.human_utterance.text, last.active_skill, last.text),
        after_llm=thread,
        # a question on the bot's own life (shared.asking.on_its_own_life), its asking read once
        asking_bot=question and on_its_own_life(dialog.human_utterance.text),
        greeted=last is not None
        and states_after_name_question(dialog.human_utterance.text, last.active_skill, last.text),
    )
    if found is None:
        return None
    chance, intent = found
    if intent == reading.REPLY:  # a reply to small talk's own question: tell me more
        intent = "about_user"
    elif intent == reading.NOD:  # a few words of thanks, goodbye or reaction: a nod
        intent = "unread"
    elif intent == reading.STATE:  # a statement of the user's own: a line for its mood
        intent = stated_line(dialog.human_utterance.text, annotations)
    elif intent == reading.ASKED:  # a question on the bot's own life: its topic, or its life
        intent = "own_life"
    elif intent not in INTENT_TOPICS:  # a deployment's reading naming intents of its own
        return None
    routing = {"skill": "smalltalk", "kind": reading.BY_READING, "raw": chance, "read": chance}
    nearer = nearer_topic(dialog.human_utterance.text, persona, annotations, intent)
    if nearer is not None:
        answer = on_topic(persona, *nearer, chance, said)
        if answer is not None:
            setattr(answer, "routing", routing)  # noqa: B010
        return answer
    topic = cast(Topic, intent)
    text = pick(render(persona, Match(topic, chance)), said)
    if text is None:
        return None
    hypothesis = SmallTalkHypothesis(
        text=text,
        confidence=chance,
        smalltalk_topic=topic,
        bot_attributes={"persona": persona.model_dump(mode="json")} if store else {},
    )
    setattr(hypothesis, "routing", routing)  # noqa: B010
    return hypothesis


def nearer_topic(
    text: str, persona: Persona, annotations: Mapping[str, Any], intent: str
) -> tuple[str, float] | None:
    """The persona's topic to answer a question to the bot with, where the reading gave
    it one of the intents that answer such a question (how the bot is, who it is, what it
    can do: :data:`shared.reading.QUESTIONS_ONLY`) only as the nearest, and a topic's
    examples are as near in meaning as that intent's are (its likeness) or nearer, and at
    least :data:`topics.NEARER_FROM`: "have you ever been anywhere?" was told "I'm doing
    great, thanks for asking! How are you?", "does talking to people all day bore you?"
    who the bot is. The intent's line answers only its own question; of two near
    readings, the line whose question the user's is nearer to fits better. None where the
    intent was read surely, the turn asks nothing, or no topic is as near. A question on
    the bot's own life (``own_life``: no intent read at all) takes the nearest topic from
    :data:`topics.NEARER_FROM`: "you eat biryani?" is the cooking topic's."""
    if intent == "own_life":
        return topics.closest(spelling.normalise(text), persona.topics, topics.NEARER_FROM)
    if intent not in reading.QUESTIONS_ONLY or reading.sure_intent(annotations) == intent:
        return None
    if not asks_something(text):
        return None
    note = annotations.get("intents")
    if not isinstance(note, Mapping) or note.get("nearest") != intent:
        return None
    likeness = note.get("likeness")
    if not isinstance(likeness, int | float):
        return None
    floor = max(float(likeness), topics.NEARER_FROM)
    return topics.closest(spelling.normalise(text), persona.topics, floor)


#: How many of the bot's last lines may hold the topic's line that "one more" asks more of:
#: "tell me a fun fact", the fact, "wow", a smile, "one more please".
MORE_WITHIN = 2


def more_of_a_topic(
    dialog: DialogView, persona: Persona, said: list[str], earlier: list[str]
) -> SkillHypothesis | None:
    """Another line of the persona's topic one of the bot's last two lines was from, when
    the user asks for more ("another", "one more please", :data:`jokes.MORE`) and the
    topic is one people ask for more of (its examples are requests: "tell me a fun
    fact"). The same topic read surely: a line of it at the top of its score, calibrated
    as the topic's. Without this, "another" got a nod by the reading, or the LLM.
    ``earlier``: the bot's lines before this turn, oldest first."""
    lately = earlier[-MORE_WITHIN:]
    text = spelling.unabbreviate(dialog.human_utterance.text)
    if not lately or not jokes.MORE.search(text):
        return None
    for name, spec in persona.topics.items():
        told = [line for line in lately if line in spec.lines]
        if told and any(asks.requests(e) for e in spec.examples):
            line = pick([line for line in spec.lines if line not in told], said)
            if line is None:
                return None
            return TopicHypothesis(
                text=line, confidence=TOPIC_BASE + TOPIC_SPAN, topic=name, similarity=1.0
            )
    return None


def greeted_how_asked(dialog: DialogView) -> bool:
    """Whether the user's turn before this one asked how the bot is ("hi how are you") and
    the greeting answered it ("Hi! I'm doing well, thanks. I'm Chorus. What's your
    name?"): people tell how they are next ("ya not bad", "im ok i guess") as often as
    their name, and a reply that says how they are is small talk's, as after its own
    "How are you?"."""
    last = dialog.bot_utterance
    return (
        last is not None
        and last.active_skill == "greeting"
        and reading.sure_intent_before(dialog) == "how_are_you"
    )


def _respond(
    dialog: DialogView, persona: Persona, store: bool, said: list[str], puzzled: bool
) -> SkillHypothesis | None:
    """Small talk's own answer, before its curve. ``puzzled``: right after a joke the user
    says it was not understood or asks for something else (:func:`asks_after_joke`); then
    only a joke they ask for is answered."""
    human = dialog.human_utterance
    joke = tell_joke(dialog, persona, said)
    if joke is not None:
        return joke
    earlier = [u.text for u in dialog.utterances[:-1] if u.speaker == "bot"]
    if puzzled:
        return None  # "i dont get it lol", "something cleaner": no mood or nod answers it
    more = more_of_a_topic(dialog, persona, said, earlier)
    if more is not None:
        return more
    # contractions and chat abbreviations read carefully; other words as typed, since a
    # thing the user names may be said back (shared/spelling.py)
    asked_how = bool(earlier) and (
        earlier[-1] in render(persona, Match("how_are_you", 0.0)) or greeted_how_asked(dialog)
    )
    match = understand(
        spelling.unabbreviate(human.text), human.annotations, persona.favourites, asked_how
    )
    if match is None or match.topic in WEAK_TOPICS or match.intent_only:
        # what the corpus or a persona topic says, when a pattern did not decide
        # the persona's likes are no answer to bad news of the user's own ("my cat is sick":
        # "No pets for me... Do you have one?"): there sympathy stands
        bad_news = match is not None and match.topic == "empathy" and tells_of_their_own(human.text)
        topic = None if bad_news else from_topics(dialog, persona, said)
        found = [h for h in (from_corpus(dialog, said), topic) if h]
        best = max(found, key=lambda h: h.confidence, default=None)
        if best is not None and (
            match is None or match.topic in WEAK_TOPICS or best.confidence > match.confidence
        ):
            return best
    # a reply to the greeting's question (the user's name) is the greeting's: no nod to it
    last = dialog.bot_utterance
    nods = bool(earlier) and (last is None or last.active_skill != "greeting")
    if match is None:
        # a short glad reaction ("nice one", "haha brilliant"): a nod (skills/smalltalk/unread.py)
        glad = unread.reaction(human.text, human.annotations, opening=not nods)
        match = None if glad is None else Match("reaction", glad)
    if match is None:
        # how the user is, in any words, asked back ("tutto bene grazie, and you?")
        back = unread.asks_back(human.text, opening=not earlier)
        match = None if back is None else Match("asked_back", back)
    if match is None:
        # a few words the bot does not read, late in the conversation ("gracias!",
        # "tschüss", "lmaooo"): thanks, a goodbye or a laugh, nodded to as well
        share = unread.unknown_share(human.text, opening=not nods)
        match = None if share is None else Match("unread", share)
    if match is None:
        return None
    text = pick(render(persona, match), said)
    if text is None:
        return None
    return SmallTalkHypothesis(
        text=text,
        confidence=match.confidence,
        smalltalk_topic=match.topic,
        by_likeness=match.by_likeness,
        by_similarity=match.by_similarity,
        bot_attributes={"persona": persona.model_dump(mode="json")} if store else {},
    )


service = Service(
    "smalltalk",
    description="Small talk in the voice of the bot's persona.",
    never_changes_view=True,
)


@service.skill
async def smalltalk(dialog: DialogView) -> list[SkillHypothesis]:
    hypothesis = respond(dialog)
    return [hypothesis] if hypothesis else []


app = service.app
# the spelling dictionary and the first names loaded at start-up, not on the first turn
spelling.warm()
unread.warm()
