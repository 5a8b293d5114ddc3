"""A scripted greeting: says hello, asks the user's name, and uses it later.

The skill keeps nothing: where the script stands (``greeting_stage``) and the user's
``name`` travel in the human attributes, which the agent merges only when this skill's
answer is the one chosen.

A name is stored for good, and every later answer may use it, so the skill takes one only
when the user gives one: "Thanks!" or "Cool" in reply to "What's your name?" is not a name
(see :func:`extract_name`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from vaderSentiment.vaderSentiment import BOOSTER_DICT, NEGATE, SentimentIntensityAnalyzer

from agent.sdk import DialogView, Service, SkillHypothesis
from shared import first_names, reading, spelling
from shared.asking import BOTS_WORDS, SUBJECT_WORDS, asked_name, asks, subject_words
from shared.calibration import calibrated
from shared.tfidf import ENGLISH_STOP_WORDS

#: Only when no intents annotator ran: with one, its reading of the utterance decides
#: (:func:`says_hello`), so that the annotator, the skill selector and this skill cannot
#: disagree on what a greeting is ("Hiya!" was the annotator's and not this pattern's).
_GREETING = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening)|howdy)\b", re.I)
_WORD = r"([A-Za-zÀ-ÿ'-]{2,30})"
#: Whose name "name's" gives when another's is said before it ("his name's Ben", "my
#: dog's name's Rex"): theirs, not the user's.
_OTHERS = r"(?<!\bhis )(?<!\bher )(?<!\btheir )(?<!\bits )(?<!\byour )(?<!\bour )(?<!'s )"
#: Phrases that can only introduce a name: they also change a name already known. "name
#: is" does too where it opens the line or a clause ("Name is Walt.", "ok good. name is
#: Vikram"); after a word it may be anyone's ("his name is Ben").
_SAYS_NAME = re.compile(
    rf"(?:\b|^)(my name is|my name's|(?:the )?{_OTHERS}name's|call me|you can call me|i go by"
    rf"|(?<![\w'] )(?<![\w'])name is)\s+"
    # after a title if one is said ("My name is Mr. Adeyemi": what to call them is the name)
    rf"(?:(?:mr|mrs|ms|miss|mx|dr|prof)\.?\s+)?{_WORD}",
    re.I,
)
#: An initial for a name, after a phrase that only introduces one: "you can call me J",
#: "just call me K." (a capital letter alone, ending the clause).
_INITIAL = re.compile(r"(?i:\b(?:call\s+me|i\s+go\s+by))\s+([A-Z])\.?\s*(?:[,.!;:)]|$)")
#: "Ingrid's my name", "Ingrid is my name": the name before the phrase that says it is one.
_NAME_IS_MINE = re.compile(rf"^\W*{_WORD}(?:'s|\s+is)\s+my\s+name\b", re.I)
#: "Marta here", "Callum then": a bare reply with a word that only places it, which
#: counts as the bare name after the bot asked for one.
_PLACED = re.compile(rf"^\W*{_WORD}\s+(?:here|then)\W*$", re.I)
#: ... and such a reply going on after a clause break ("Marta here. I teach maths to 12
#: year olds"), where the word is a name only written as one (:func:`extract_name`).
_PLACED_THEN_MORE = re.compile(rf"^\W*{_WORD}\s+here\s*[,.!;:]\s*\w", re.I)
#: "names oskar", "the names Connor": "name's" typed without its apostrophe, which the
#: spelling reading leaves as typed ("names" is a word of its own). Only where it opens the
#: utterance or a clause, as "name's" does: "the names are hard" has a word that is no name
#: after it, and "I like the names" none.
_NAMES_SAYS = re.compile(rf"(?:^|[.!?,;]\s*)(?:the\s+)?names\s+{_WORD}\W*$", re.I)
#: Phrases that introduce a name or anything else ("I'm from Berlin", "I'm feeling sad"):
#: a name only when one word ends the clause (see :func:`extract_name`), after a title
#: if one is said ("I am Miss Hyacinth, 84").
_MAYBE_NAME = re.compile(
    rf"(?:^|[.!?,;]\s*|\b(?:and|hi|hello|hey|ok|okay|oh|fine|well|so|lol|haha|sorry)\s+)"
    rf"(?:i am|i'm|im|it's|its|this is)\s+(?:(?:mr|mrs|ms|miss|dr)\.?\s+)?{_WORD}"
    # a word that only places it ("Marta here", "This is Harold speaking")
    rf"(?:\s+(?:here|then|speaking))?"
    # the clause ends there: punctuation, an emoji, "and ...", "btw", "by the way", a laugh
    # ("its ellie lol"), "from ..." (a capitalised first name only: "I'm Elsa from
    # Stockholm") or nothing
    rf"\s*(?=$|[^\w\s'-]|and\b|btw\b|by\s+the\s+way\b|lol\b|haha\b|lmao\b|from\b)",
    re.I,
)
_ASK_NAME = re.compile(r"\b(what'?s|what is|do you (know|remember)) my name\b", re.I)
#: Words that say something else than a name: how the user is ("I'm fine", "I'm home"),
#: where a reply to "what's your name?" dodges it ("Why?", "Guess", "Later", "Pass"),
#: replies VADER's lexicon lacks ("Right", "Oops", "Yup"), and the greetings and goodbyes
#: the intents annotator may not be there to recognise. The feelings, interjections and
#: negations ("Thanks", "Cool", "Wow", "Nope") come from VADER (:data:`FEELING_WORDS`).
_NOT_NAMES = {
    "fine",
    "good",
    "ok",
    "okay",
    "well",
    "great",
    "alright",
    "bored",
    "tired",
    "sad",
    "happy",
    "sorry",
    "ready",
    "sure",
    "awesome",
    "cool",
    "excellent",
    "bad",
    "glad",
    "sick",
    "not",
    "here",
    "back",
    "so",
    "very",
    "busy",
    "done",
    "home",
    "hungry",
    "why",
    "what",
    "who",
    "how",
    "huh",
    "hmm",
    "hm",
    "um",
    "uh",
    "guess",
    "later",
    "maybe",
    "tomorrow",
    "now",
    "anytime",
    "whatever",
    "nobody",
    "anonymous",
    "secret",
    "pass",
    "skip",
    "dunno",
    "idk",
    "nevermind",
    "anyway",
    "right",
    "exactly",
    "indeed",
    "yup",
    "hehe",
    "oops",
    "omg",
    "test",
    "robot",
    "human",
    "bot",
    "me",
    "you",
    "hi",
    "hello",
    "hey",
    "bye",
    "goodbye",
    # words that point or place, before "here", "then" or "'s my name" ("over here",
    # "that's my name")
    "that",
    "this",
    "it",
    "there",
    "over",
    "out",
    "up",
    "down",
    "in",
    "on",
}
#: The words of VADER's sentiment lexicon (7,500 feelings, interjections and slang:
#: "thanks", "ok", "yes", "sure", "cool", "wow", "lol", "nah"), its negations ("nope",
#: "nothing", "never") and its intensifiers ("really", "totally"): a reply made of one of
#: them says how the user feels about the question, not what they are called.
FEELING_WORDS: frozenset[str] = frozenset(
    {*SentimentIntensityAnalyzer().lexicon, *NEGATE, *BOOSTER_DICT}
)
#: Words of that lexicon that are first names too, and taken as names: the first names of
#: the US 1990 census lists (5,163 of them, as the ``names`` package ships them) that the
#: lexicon holds, less those that are replies as well ("ok", "ha", "ty", "love", "miss").
NAMES_IN_LEXICON: frozenset[str] = frozenset(
    {
        "chance",
        "charity",
        "diamond",
        "earnest",
        "faith",
        "freeman",
        "glory",
        "grace",
        "grant",
        "harmony",
        "hope",
        "jewel",
        "joy",
        "kia",
        "liberty",
        "mercy",
        "merry",
        "mia",
        "noble",
        "precious",
        "rich",
        "rob",
        "sunny",
        "tia",
    }
)
#: An intent the intents annotator is this sure of ("Thanks!" is thanks, "Yes" is yes)
#: means the reply is not a bare name (:func:`recognised_intent`). The skill selector's own
#: floor, as every skill reads a sure intent (:func:`shared.reading.sure_intent`).
INTENT_FLOOR = reading.SURE
#: Under this likeness to the nearest intent's examples the annotator's guess is no reading
#: at all: what a reading above it is worth is the calibration's (answer type greet_by_likeness).
LIKENESS_FLOOR = 0.4


def _name(word: str) -> str | None:
    """``word`` as a name: capitalised, without a quote or dash at its ends ("Robert'"),
    and none that is no name or a title ("I'm Dr. Okafor": "Dr" is not what to call them)."""
    word = word.strip("'-")
    if len(word) < 2 or word.lower() in _NOT_NAMES or word.lower() in _TITLES:
        return None
    return word[0].upper() + word[1:]


def is_common_word(word: str) -> bool:
    """Whether ``word`` has a meaning of its own that a bare reply would carry."""
    lowered = word.lower()
    return lowered in _NOT_NAMES or (lowered in FEELING_WORDS and lowered not in NAMES_IN_LEXICON)


def recognised_intent(annotations: Mapping[str, Any]) -> str | None:
    """The intent the intents annotator is sure the utterance has, other than giving a name."""
    intent = reading.sure_intent(annotations)
    return None if intent == "tell_name" else intent


def reads_as_name(word: str) -> bool:
    """Whether a bare word, the whole reply to the name question, reads as a name: not a
    common word (:func:`is_common_word`), nor, in lowercase, a verb with its final "g"
    dropped ("chillin", "nothin": the speller's dictionary holds it with the "g"), unless
    it is a first name of some language (:mod:`shared.first_names`: "kevin", "robin")."""
    if is_common_word(word):
        return False
    lowered = word.lower()
    if word[0].isupper() or lowered in first_names.first_names():
        return True
    return not (lowered.endswith("in") and spelling.is_english(lowered + "g"))


def uncapitalised(text: str) -> str:
    """``text`` in lowercase when it is all capitals and more than one word ("IM SO HAPPY I
    PASSED MY DRIVING TEST", read as "I'm SO HAPPY ..."): there a capital marks no name,
    and the name readings that look for one ("MY" after "I PASSED") would find any word."""
    letters = [c for c in text if c.isalpha()]
    shouted = len(text.split()) > 1 and sum(c.isupper() for c in letters) >= 0.8 * len(letters)
    return text.lower() if shouted else text


def extract_name(text: str, *, bare_word_ok: bool, name_known: bool = False) -> str | None:
    """The name the user gives, if they give one.

    "My name is Ann" always does; "call me Ann" too (and "call me J", an initial), but not
    "call me later"; "I go by Lu"
    when the name is capitalised ("I go by bus" is not one). "I'm Ann"
    does only while no name is known, when "Ann" ends the clause ("I'm from Berlin", "I'm
    feeling sad" do not) and is capitalised, or right after the bot asked (``bare_word_ok``,
    when a bare "Ann" does too). After asking, a lowercase "i'm ..." or a bare word is a name
    only when it is not a common word (:func:`is_common_word`): "Thanks!", "Cool", "Why?" and
    "Nope" are not names. A reply that asks something back ("Ann?", "Why?"), or any
    question ("how much fuel a Bajaj Boxer uses"), gives none by its bare words.
    """
    text = uncapitalised(text.replace("\u2019", "'").strip())
    initial = _INITIAL.search(text)
    if initial:
        return initial.group(1)
    says = _SAYS_NAME.search(text)
    if says:
        word, phrase = says.group(2), says.group(1).lower()
        if phrase == "i go by" and not (word[0].isupper() or bare_word_ok):
            return None  # "I go by bus": a name after "go by" is written as one, or asked for
        if phrase == "name is" and not word[0].isupper() and is_common_word(word):
            return None  # "name is not important": a word that is no name
        if "name" in phrase or not is_common_word(word):
            return _name(word)
        return None
    names = _NAMES_SAYS.search(text)
    if names and not is_common_word(names.group(1)):
        return _name(names.group(1))
    mine = _NAME_IS_MINE.search(text)
    if mine and not is_common_word(mine.group(1)):
        return _name(mine.group(1))
    if name_known:
        return None
    maybe = _MAYBE_NAME.search(text)
    if maybe and text[maybe.end() :].lower().startswith("from"):
        # "I'm Elsa from Stockholm", "this is Priti from the platform team", but "I'm back
        # from work": a capitalised first name of some language before "from"
        word = maybe.group(1)
        if word[0].isupper() and word.lower() in first_names.first_names():
            return _name(word)
    elif maybe:
        word = maybe.group(1)
        if word[0].isupper() or (bare_word_ok and not is_common_word(word)):
            return _name(word)
    placed = _PLACED.search(text) if bare_word_ok else None
    if placed and not is_common_word(placed.group(1)):
        return _name(placed.group(1))
    going_on = _PLACED_THEN_MORE.search(text) if bare_word_ok else None
    if going_on and going_on.group(1)[0].isupper():
        word = going_on.group(1)
        if word.lower() in first_names.first_names() and not is_common_word(word):
            return _name(word)
    if bare_word_ok and not text.endswith("?") and not asks(spelling.normalise(text)):
        # a question gives no name ("how much fuel a Bajaj Boxer uses for 100km")
        words = re.findall(r"[A-Za-zÀ-ÿ'-]{2,30}|\S+", text.rstrip(".!"))
        if len(words) == 1 and re.fullmatch(_WORD, words[0]) and reads_as_name(words[0]):
            return _name(words[0])
        return (
            name_first(text) or name_last(text) or first_name_in(words) or unknown_word_first(words)
        )
    return None


#: A reply that opens on a word and a clause break: "Danny, from Leeds", "Tom. Quick one",
#: "zoe :)", "Beth 🙂", "lily!! whats urs", "Sam (she/her)", or where the user is from
#: ("Ines from Porto").
_NAME_FIRST = re.compile(rf"^\W*{_WORD}\s*(?:[^\w\s'-]|from\b|$)", re.I)
_VOWEL = re.compile(r"[aeiouyà-ÿ]")
#: Titles before a name ("Mr. Patel"): the name is the word after.
_TITLES = frozenset({"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "madam"})


#: A reply to the name question that opens on a word or two of assent or mood and ends on
#: one more: "fine. dave", "good. marcus", "fair enough. dave", "oh sorry, Priya".
_LEAD_THEN_NAME = re.compile(
    rf"^\W*(?:(?:ok|okay|fine|good|sure|alright|oh|sorry|yeah|yes|well|lol|haha|hmm|fair\s+enough)"
    rf"\W+){{1,3}}{_WORD}\W*$",
    re.I,
)


def first_name_matched(pattern: re.Pattern[str], text: str) -> str | None:
    """The word ``pattern`` (matched at the start of ``text``) holds in its group, as a
    name, when it is a first name of some language (:mod:`shared.first_names`), in any
    case, and not a common word ("Sure, ...", "ok, thanks")."""
    found = pattern.match(text)
    if found is None:
        return None
    word = found.group(1)
    if word.lower() not in first_names.first_names() or is_common_word(word):
        return None
    return _name(word)


def name_last(text: str) -> str | None:
    """In a reply to the name question, a first name after a word or two of assent or mood
    (:data:`_LEAD_THEN_NAME`, :func:`first_name_matched`): the user gives in after the bot
    said why it asks ("fine. dave") or says how they are first ("good. marcus")."""
    return first_name_matched(_LEAD_THEN_NAME, text)


def name_first(text: str) -> str | None:
    """In a reply to the name question, a first name opening it and ended by a clause
    break ("Danny, from Leeds", "Gerald, retired engineer", "zoe :)"): a first name of
    some language (:mod:`shared.first_names`), in any case, and not a common word
    ("Sure, ...", "Nope, not yet")."""
    return first_name_matched(_NAME_FIRST, text)


#: A reply to the name question this long or shorter may give the name in words the skill
#: does not read ("Je m'appelle Jacqueline. I speak a little English.").
NAMED_WORDS = 8


def first_name_in(words: list[str]) -> str | None:
    """In a short reply to the name question, the first capitalised word after the first
    that is a first name of some language (:mod:`shared.first_names`): "mi chiamo
    Giulia", "ik ben Sanne", "I'm Ahmed from Leicester". The first word is left out, as
    any sentence's first word is capitalised ("Will do"); a reply of only a name is read
    above."""
    words = [word for word in words if re.fullmatch(_WORD, word)]
    if not 1 < len(words) <= NAMED_WORDS:
        return None
    names = first_names.first_names()
    later = [
        word
        for before, word in itertools.pairwise(words)
        # "I'm from India", "I live in Paris": a place, though a name too
        if before.lower() not in _PLACES_AFTER and word[0].isupper()
    ]
    for word in later:
        if word.lower() in names and not is_common_word(word):
            return _name(word)
    # then a name the lists lack: "mera naam Sunil hai", "igama lami ngu Thandi"
    return next((_name(word) for word in later if unknown_capitalised(word)), None)


def unknown_capitalised(word: str) -> bool:
    """A capitalised word that no English dictionary holds and is no common word or title:
    in a reply to the name question, a name of some language that the first-name lists
    lack ("Jógvan", "Haruto", "Thandi"), as a bare unknown word is."""
    lowered = word.lower()
    return (
        word[0].isupper()
        and _VOWEL.search(lowered) is not None  # "Pfft", "Hmm", "Smh": a sound or letters
        # "Mine's": an English word with its ending, not a name
        and not spelling.is_english(word.split("'")[0])
        and not is_common_word(word)
        and lowered not in _TITLES
        and spelling.unabbreviate(lowered) == lowered  # "Tbh", "Idk": chat abbreviations
    )


def unknown_word_first(words: list[str]) -> str | None:
    """In a short reply to the name question, its first word when that is a name the
    lists lack (:func:`unknown_capitalised`): "Haruto desu", "Jógvan, up north"; after a
    title, the word after it ("Mr. Patel")."""
    words = [word for word in words if re.fullmatch(_WORD, word)]
    if not 1 < len(words) <= NAMED_WORDS:
        return None
    if words[0].lower() in _TITLES:
        title = words[1]
        return None if not title[0].isupper() or is_common_word(title) else _name(title)
    return _name(words[0]) if unknown_capitalised(words[0]) else None


#: A reply that opens on a word and ends there, or at a clause break or a word that only
#: places it ("Brenda", "Tom. Quick one", "Chloé by the way", "Jan here, from Amsterdam").
_PLAIN = re.compile(rf"^\W*{_WORD}\s*(?:[,.!;:(]|(?:from|here|btw|by\s+the\s+way)\b|$)", re.I)
#: The longest line read as a name given plainly (:func:`plain_name`).
PLAIN_WORDS = 6
#: The longest line opening on a first name and a clause break that is read as the user
#: introducing themselves ("Shannon, art centre coordinator out near Alice"): what they
#: say of themselves after their name takes more words than a name alone.
INTRODUCED_WORDS = 16
#: A first name opening the line and ending its clause at a mark.
_INTRODUCED = re.compile(rf"^\W*{_WORD}\s*[,.!;:(\u2013\u2014-]")


def plain_name(text: str) -> str | None:
    """A name given plainly, when the bot did not ask for one and none is known: a short
    line (:data:`PLAIN_WORDS` words at most, asking nothing) shaped as a name, a
    capitalised first name of some language (:mod:`shared.first_names`) opening it and
    ending its clause ("Brenda", "Sam, short for Samantha", "Chloé by the way"), or
    "I'm"/"it's" before a first name in any case ("im zoe btw", "fine. its kat"). How
    often such a line was a name is its curve's (answer type ``name_plain``). A line
    opening on the name and a mark may go on about the user
    (:data:`INTRODUCED_WORDS`)."""
    text = uncapitalised(text)
    words = len(text.split())
    if words > INTRODUCED_WORDS or asks(text):
        return None
    names = first_names.first_names()
    opens = _PLAIN.match(text) if words <= PLAIN_WORDS else _INTRODUCED.match(text)
    if opens is not None:
        word = opens.group(1)
        if word[0].isupper() and word.lower() in names and not is_common_word(word):
            return _name(word)
    if words > PLAIN_WORDS:
        return None
    maybe = _MAYBE_NAME.search(text)
    if maybe is not None:
        word = maybe.group(1)
        if word.lower() in names and not is_common_word(word):
            return _name(word)
    return None


def name_on_opening(text: str) -> str | None:
    """The name a user gives in the turn that opens the conversation with a greeting, in
    any language ("ciao! mi chiamo Giulia", "hola soy Marta", "hi im ravi"): said as one
    in English (:func:`extract_name`, "Hi, I'm Ravi", or a lowercase first name after
    "I'm"), or a capitalised first name of some language (:mod:`shared.first_names`)
    further into the turn than the word after its first: that word is who the greeting
    is for ("Hi Anna", "hey Buddy"), not who greets."""
    said = extract_name(text, bare_word_ok=False)
    if said is not None:
        return said
    maybe = _MAYBE_NAME.search(text)
    if maybe is not None:
        word = maybe.group(1)
        if word.lower() in first_names.first_names() and not is_common_word(word):
            return _name(word)
    words = re.findall(r"[A-Za-zÀ-ÿ'-]{2,30}|\S+", text.rstrip(".!"))
    words = [word for word in words if re.fullmatch(_WORD, word)]
    return first_name_in(words[1:]) if len(words) > 2 else None


#: Words after which a capitalised word is a place, not the user's name.
_PLACES_AFTER = frozenset({"from", "in", "at", "to", "near", "of", "de", "aus", "di", "da"})


#: A question back instead of a name ("Why do you ask?", "Why?", "why do you want to know"):
#: the user wonders why the bot asked, which the script can say.
_WHY_ASK = re.compile(
    r"^\W*(why|how come|what for)\b"
    r"(\s+(do|would|did) you\s+(ask|want to know|(need|want) (it|that|to know|my name)))?\W*$",
    re.I,
)


#: Words of a reply that puts the name question off, and nothing else.
_PUTS_OFF = frozenset(
    {"guess", "later", "maybe", "whatever", "nobody", "anonymous", "secret", "pass", "skip"}
    | {"dunno", "idk", "nevermind", "huh", "you", "first", "not", "telling", "no", "nope"}
)
#: A question back is about the bot's question ("Is that important?", "what's it to
#: you?"), not about anything else ("What's the speed of light?").
_ABOUT_ASKING = frozenset({"you", "that", "it", "this", "why", "important", "matter"})
#: A reply this short, right after the bot asked the user's name, that gives no name and
#: says nothing the intents annotator recognises, and asks back ("Is that important?") or
#: only puts it off ("you first", "guess"), declines to give one.
DODGE_WORDS = 5


#: How sure each way of declining the name question is, as the script's raw score (its
#: calibration, answer type why_ask, says what each is worth): asking why says what it is; a reply
#: of put-off words nearly so; a short question back on "that" or "it" is a guess, and one
#: with only "you" in it a weaker one, which a question about the bot ("are you alive?",
#: "do you ever eat anything?") also is.
WHY_ASK_SCORES = {"why": 0.95, "puts_off": 0.9, "asks_back": 0.7, "asks_you": 0.6}
#: Words of a question back that point at the bot's question itself ("Is that important?",
#: "what's it to you?"), not only at the bot ("are you alive?").
_ABOUT_THE_QUESTION = _ABOUT_ASKING - {"you"}
#: The script's answer to a reply that declines the name question.
WHY_ASK_LINE = "Just so I know what to call you. You don't have to tell me, though."
#: A reply to the name question that asks the bot's name back: "whats yours", "what's ur
#: name first", "you tell me yours first", "and yours?", "you first". A plain "what's your
#: name?" is small talk's question about the bot, which its identity line answers.
_ASKS_NAME_BACK = re.compile(
    r"^\W*(?:(?:and|but|ok|okay|so|well|hmm|lol)\W+)?"
    r"(?:(?:(?:what'?s|what\s+is|tell\s+me|(?:you|u)\s+tell\s+me)\s+)?(?:yours|urs)(?:\s+first)?"
    r"|(?:what'?s|what\s+is|tell\s+me|(?:you|u)\s+tell\s+me)\s+(?:your|ur)\s+name\s+first"
    r"|(?:you|u)\s+first)\W*$",
    re.I,
)
#: ... the script's answer to it: its name, and the question again.
NAME_BACK_LINE = "I'm Chorus! And what's your name?"
#: What the script asks once it knows what to call the user.
TOPIC_QUESTION = "What would you like to talk about?"
#: ... and to a reply that keeps the name back once the bot said why it asked.
LET_GO_LINE = "That's fine, no name needed. What would you like to talk about?"


#: A reply that says it keeps the name back, whatever else it holds ("I'll pass on the
#: name, thanks", "ok, I'd rather not share it", "not telling u lol"): a thanks or a word of
#: mood in it does not make it small talk's.
_KEEPS_IT = re.compile(
    r"\b(?:(?:i'?d|i\s+would)\s+rather\s+not|prefer\s+not|not\s+(?:telling|saying|sharing)"
    r"|won'?t\s+(?:tell|say|share)|pass\s+on\s+(?:the|my)\s+name|keep\s+(?:it|that|my\s+name)\s+to\s+myself)\b"
    # "Rather not, it's a work account", "I'd prefer to stay anonymous", "dont really want to
    # say", "do i have to say"
    r"|^\W*rather\s+not\b|\b(?:stay|remain|be)\s+anonymous\b"
    r"|\b(?:don'?t|do\s+not)\s+(?:really\s+)?(?:want|wanna|need)\s+to\s+(?:say|tell|share|give)\b"
    r"|^\W*(?:do|must)\s+i\s+have\s+to\s+(?:say|tell|share)(?:\s+(?:you|u))?\W*$",
    re.I,
)


#: A reply that ends by asking the bot back ("gut, danke! and you?", "jól, köszi. you?"):
#: the user says how they are, in any words, and asks how the bot is; small talk's to
#: answer (its ``asked_back``), not a question about the name.
_ASKS_HOW_BACK = re.compile(
    r"(?:(?:^|[\s,.!;])(?:and|how\s+about|what\s+about|&)\s+(?:you|u|yourself|urself)\s*[?!.]*"
    r"|[,.!;]\s*(?:you|u)\s*\?+)\s*$",
    re.IGNORECASE,
)


def declines(text: str, annotations: Mapping[str, Any], name_known: bool) -> float | None:
    """The user answers the name question with a question or a dodge instead of a name:
    how sure that reading is (:data:`WHY_ASK_SCORES`), or None."""
    if _WHY_ASK.search(text):
        return WHY_ASK_SCORES["why"]
    if _ASKS_HOW_BACK.search(text):
        return None  # "gut, danke! and you?": how the user is, and the bot asked back
    if _KEEPS_IT.search(text):
        return WHY_ASK_SCORES["puts_off"]
    if recognised_intent(annotations) is not None or extract_name(
        text, bare_word_ok=True, name_known=name_known
    ):
        return None
    words = re.findall(r"[\w']+", text.lower())
    if not 0 < len(words) <= DODGE_WORDS or _GREETING.search(text):
        return None
    if set(words) <= _PUTS_OFF:  # only words that put it off ("guess", "you first")
        return WHY_ASK_SCORES["puts_off"]
    # a question back ("Is that important?"), about the question ("that", "it") or only
    # with "you" in it, which a question about the bot ("are you alive?") also has; not
    # one about a subject of its own ("Does it expose Prometheus metrics?")
    if (
        text.rstrip().endswith("?")
        and set(words) & _ABOUT_ASKING
        and subject_words(text, _ABOUT_ASKING | _THE_QUESTIONS_WORDS) < SUBJECT_WORDS
    ):
        return WHY_ASK_SCORES["asks_back" if set(words) & _ABOUT_THE_QUESTION else "asks_you"]
    return None


#: The longest reply to the name question read by its shape as declining it
#: (:func:`declines_by_shape`).
SHAPE_WORDS = 8
#: Words a reply to the name question may hold and still have no subject of its own: the
#: question's own ("name") and whom it is asked of ("bot", the bot's name), and forms of
#: "do" that scikit-learn's stop words lack ("does it matter").
_THE_QUESTIONS_WORDS = BOTS_WORDS | {"name", "names"}
#: Words that point at the question itself ("does it matter", "what's that to you", "why
#: does a bot need a name", "what do you need my name for"; not "what should I name my
#: puppy?"). A question back with none points at the bot ("who is this", "can you hear
#: me", "ARE YOU WORKING") or elsewhere, and is not the greeting's.
_POINTS_AT_THE_QUESTION = re.compile(r"\b(?:it|that|(?:my|a|the)\s+name)\b", re.IGNORECASE)
#: How sure each shape of declining is, as the raw score its curve (answer type
#: ``declined_by_shape``) reads: a question back on the question with one word of its own
#: at most says what it is; with two ("do i need to say it", "why do you need to know
#: that") it is a guess; a refusal ("Nope, not yet", "none of ur business", "take a
#: guess") nearly says what it is.
SHAPE_SCORES = {"asks_back": 0.8, "refuses": 0.7, "asks_more": 0.65}
#: A question: its mark, or a question word or an auxiliary opening it ("does it matter",
#: "why does a bot need a name"); "oskar is the name" has its "is" further in.
_ASKS_BACK = re.compile(
    r"\?|^\W*(?:what|what's|whats|why|how|who|whom|whose|when|where|which|do|does|did|is|are"
    r"|was|can|could|would|will|should|must)\b",
    re.IGNORECASE,
)
#: Questions of place, time or choice ask about the world, not about the name question
#: ("where do the operators see it"), whatever "it" they hold; so do questions of manner
#: and of what one can do ("how do I back it up?", "can I deploy it on kubernetes?"),
#: which no reply declining the name of the training sets opened with. "how come" asks
#: why.
_ASKS_ELSEWHERE = re.compile(
    r"^\W*(?:where|when|which|whose|how(?!\s+come\b)|can|could)\b", re.IGNORECASE
)
#: VADER's negations, as typed with or without their apostrophe.
_NEGATIONS = frozenset(n.replace("'", "") for n in NEGATE)


def declines_by_shape(text: str) -> float | None:
    """A reply to the name question that gives no name (the caller read none), read by its
    shape, not its phrases: short (:data:`SHAPE_WORDS` words at most), with no name in it
    (:func:`name_anywhere`), and either asking back (:data:`_ASKS_BACK`) about the question
    (:data:`_POINTS_AT_THE_QUESTION`) with few words of its own (the words that are not
    English stop words nor the question's own), or a refusal: a negation of VADER's or a
    word that puts the question off, in :data:`DODGE_WORDS` words at most, with one word
    of its own at most and no feeling (VADER's lexicon: "not great to be honest", "ya not
    bad" say how the user is). The raw score says which (:data:`SHAPE_SCORES`); its curve
    and the turn's reading say how sure each is."""
    words = re.findall(r"[\w']+", text.lower())
    if not 0 < len(words) <= SHAPE_WORDS or _ASKS_HOW_BACK.search(text) or name_anywhere(text):
        return None  # how the user is, asked back ("gut, danke! and you?"); a name in it
    own = {w.split("'")[0] for w in words} - ENGLISH_STOP_WORDS - _THE_QUESTIONS_WORDS
    if _ASKS_BACK.search(text):
        if not _POINTS_AT_THE_QUESTION.search(text) or _ASKS_ELSEWHERE.search(text):
            return None  # "who is this", "what should I name my puppy?": not about the question
        if len(own) <= 1:
            return SHAPE_SCORES["asks_back"]
        return SHAPE_SCORES["asks_more"] if len(own) == 2 else None
    flat = {w.replace("'", "") for w in words}
    refuses = flat & _NEGATIONS or set(words) & _PUTS_OFF - {"you", "first"}
    feeling = (own - _NEGATIONS) & FEELING_WORDS
    if refuses and len(words) <= DODGE_WORDS and len(own - _NEGATIONS) <= 1 and not feeling:
        return SHAPE_SCORES["refuses"]
    return None


def says_hello(text: str, annotations: Mapping[str, Any]) -> bool:
    """The user greets: as the intents annotator reads it when it ran (its sure
    ``greeting``, or a greeting it also found beside another sure intent: "hi, how's it
    going?" opens with one, and a greeting is the greeting's whatever else the turn
    holds), else by this skill's own pattern."""
    intents = annotations.get("intents")
    if isinstance(intents, Mapping) and "intent" in intents:
        also = intents.get("also")
        return float(intents.get("confidence") or 0.0) >= INTENT_FLOOR and (
            intents.get("intent") == "greeting" or (isinstance(also, list) and "greeting" in also)
        )
    return bool(_GREETING.search(text))


def opening_greeting(annotations: Mapping[str, Any]) -> float | None:
    """The intents annotator's confidence when it read the conversation's opening turn as a
    greeting only because it is short and nothing else reads it (method ``opening``:
    "konnichiwa!", "helo", "wsg"), else None."""
    intents = annotations.get("intents")
    if not isinstance(intents, Mapping) or intents.get("method") != "opening":
        return None
    if intents.get("intent") != "greeting":
        return None
    return float(intents.get("confidence") or 0.0)


def greeting_by_likeness(annotations: Mapping[str, Any]) -> float | None:
    """How alike the utterance is to the intents annotator's greeting examples, when that
    is its nearest intent and no sure reading ("evening!" is like "good evening", "oh, hi by
    the way" like "hi"): the annotator's likeness, for the calibration to say how often
    such a reading is right. A pattern's partial reading ("Hi, what's a good name for a
    bakery?") is no such guess: the rest of the utterance is a question of its own."""
    intents = annotations.get("intents")
    if not isinstance(intents, Mapping):
        return None
    nearest, likeness = intents.get("nearest"), intents.get("likeness")
    if nearest is None and intents.get("method") == "similarity":
        # an annotator that reports no nearest intent: its own reading by likeness
        nearest, likeness = intents.get("intent"), intents.get("confidence")
    if intents.get("method") == "pattern" or not isinstance(likeness, int | float):
        return None
    if nearest != "greeting" or not LIKENESS_FLOOR <= likeness < INTENT_FLOOR:
        return None
    return float(likeness)


#: The script's first line, and the same when the greeting also asks how the bot is ("hi,
#: how are you?", "sup"): answered before the name is asked.
GREET = "Hi! I'm Chorus. What's your name?"
GREET_ASKED_HOW = "Hi! I'm doing well, thanks. I'm Chorus. What's your name?"


def asks_how(annotations: Mapping[str, Any]) -> bool:
    """The greeting is the intents annotator's ``how_are_you`` too ("hi, how's it
    going?")."""
    intents = annotations.get("intents")
    return isinstance(intents, Mapping) and intents.get("intent") == "how_are_you"


def greets(text: str, annotations: Mapping[str, Any]) -> bool:
    """The user greets, however the intents annotator read it: surely, as a short opening
    turn nothing else reads, or by likeness to its greetings."""
    return (
        says_hello(text, annotations)
        or opening_greeting(annotations) is not None
        or greeting_by_likeness(annotations) is not None
    )


#: Someone else's name: "what did i say her name was" is like "what did i say my name
#: was" to the annotator's examples, and asks for the cat's.
_OTHERS_NAME = re.compile(r"\b(?:her|his|their|its|our|your|ur|\w+'s)\s+names?\b", re.IGNORECASE)
_MY_NAME = re.compile(r"\bmy\s+name\b", re.IGNORECASE)


def asks_name(text: str, annotations: Mapping[str, Any]) -> bool:
    """The user asks what their name is: the intents annotator's ``ask_name`` when it ran,
    else this skill's own pattern; not when they ask for someone else's and not theirs
    (:data:`_OTHERS_NAME`)."""
    if _OTHERS_NAME.search(text) and not _MY_NAME.search(text):
        return False
    intents = annotations.get("intents")
    if isinstance(intents, Mapping) and "intent" in intents:
        return (
            intents.get("intent") == "ask_name"
            and float(intents.get("confidence") or 0.0) >= INTENT_FLOOR
        )
    return bool(_ASK_NAME.search(text))


def respond(
    text: str,
    attributes: Mapping[str, object],
    annotations: Mapping[str, Any] | None = None,
    asked: bool = True,
    explained: bool = False,
    opening: bool = False,
) -> SkillHypothesis | None:
    """The greeting's answer to ``text``, or None.

    A bare reply is read as a name only right after the bot asked for one (``asked``: the
    bot's last line is the question, and the script is at ``asked_name``), and not when the
    intents annotator is sure it says something else ("Thanks!", "Yes", "Bye"); or right
    after the bot said why it asked (``explained``). On the conversation's ``opening``
    turn, a greeting that also gives the name in any language is greeted by that name
    (:func:`name_on_opening`).
    """
    found = _scripted(text, attributes, annotations or {}, asked, explained, opening)
    if found is None:
        return None
    answer_type, hypothesis = found
    return calibrated(hypothesis, "greeting", answer_type, annotations)


def _scripted(
    text: str,
    attributes: Mapping[str, object],
    annotations: Mapping[str, Any],
    asked: bool,
    explained: bool = False,
    opening: bool = False,
) -> tuple[str, SkillHypothesis] | None:
    """The script's line for ``text`` and which line it is (its calibration answer type), with
    the script's own certainty as the raw confidence. ``explained``: the bot's last line said
    why it asked the name (:data:`WHY_ASK_LINE`), which invites the name as the question did
    ("fine, its marcus", "ha, fair. im viktor"), though asking why again gets no second
    explanation."""
    stage = attributes.get("greeting_stage")
    name = attributes.get("name")
    # "im oskar", "y do u ask": contractions and chat abbreviations read carefully, every
    # other word as typed, so the name said back is the one the user typed (shared/spelling.py)
    text = spelling.unabbreviate(text)
    if stage == "asked_name" and asked and _ASKS_NAME_BACK.search(text):
        # "whats yours", "you tell me yours first": the bot's name, and the question again
        return "name_asked_back", SkillHypothesis(text=NAME_BACK_LINE, confidence=0.9)
    declined = declines(text, annotations, bool(name)) if stage == "asked_name" and asked else None
    if declined is not None:
        return "why_ask", SkillHypothesis(
            text=WHY_ASK_LINE,
            confidence=declined,
            human_attributes={"greeting_stage": "done"},
        )
    if opening and not name and greets(text, annotations):
        given = name_on_opening(text)
        if given is not None:
            # "ciao! mi chiamo Giulia": greeted by the name, which is not asked again
            return "greet_named", SkillHypothesis(
                text=f"Hi {given}, nice to meet you! I'm Chorus. {TOPIC_QUESTION}",
                confidence=0.9,
                human_attributes={"name": given, "greeting_stage": "done"},
            )
    if stage == "done" and explained and not name and _KEEPS_IT.search(text):
        # "ok, I'd rather not share it" after the bot said why it asked: the name let go
        return "name_let_go", SkillHypothesis(
            text=LET_GO_LINE, confidence=WHY_ASK_SCORES["puts_off"]
        )
    invited = (stage == "asked_name" and asked) or (stage == "done" and explained)
    if invited and recognised_intent(annotations) is None:
        found = extract_name(text, bare_word_ok=True, name_known=bool(name))
        found = found or (None if name else plain_name(text))
        if found:
            return "name_after_asking", SkillHypothesis(
                text=f"Nice to meet you, {found}! What would you like to talk about?",
                confidence=0.95,
                human_attributes={"name": found, "greeting_stage": "done"},
            )
    shape = None
    if stage == "asked_name" and asked and recognised_intent(annotations) in (None, "no"):
        shape = declines_by_shape(text)
    if shape is not None:
        # "does it matter", "dont care": no name, and a question back or a refusal
        return "declined_by_shape", SkillHypothesis(
            text=WHY_ASK_LINE, confidence=shape, human_attributes={"greeting_stage": "done"}
        )
    found = extract_name(text, bare_word_ok=False, name_known=bool(name))
    if found and found != name:
        return "name_given", SkillHypothesis(
            text=f"Nice to meet you, {found}!",
            confidence=0.9,
            human_attributes={"name": found, "greeting_stage": "done"},
        )
    plain = None if name or invited or opening else plain_name(text)
    if plain is not None:
        # "Brenda", "im zoe btw" later in the conversation: a name given unasked
        return "name_plain", SkillHypothesis(
            text=f"Nice to meet you, {plain}!",
            confidence=0.8,
            human_attributes={"name": plain, "greeting_stage": "done"},
        )
    if asks_name(text, annotations):
        if name:
            return "name_recalled", SkillHypothesis(text=f"Your name is {name}.", confidence=0.95)
        return "name_unknown", SkillHypothesis(
            text="I don't know your name yet. What is it?",
            confidence=0.9,
            human_attributes={"greeting_stage": "asked_name"},
        )
    short = opening_greeting(annotations)
    if short is not None:
        # a short opening turn nothing else reads ("konnichiwa!", "helo"): the script's
        # first line, calibrated apart (answer type greet_opening)
        return "greet_opening", SkillHypothesis(
            text=GREET,
            confidence=short,
            human_attributes={"greeting_stage": "asked_name"},
        )
    if says_hello(text, annotations):
        if name:
            return "greet_again", SkillHypothesis(text=f"Hello again, {name}!", confidence=0.9)
        return "greet", SkillHypothesis(
            text=GREET_ASKED_HOW if asks_how(annotations) else GREET,
            confidence=0.9,
            human_attributes={"greeting_stage": "asked_name"},
        )
    likeness = greeting_by_likeness(annotations)
    if likeness is not None and not asks_about_a_subject(text):
        # the same lines, as sure as the reading: calibrated apart (answer type greet_by_likeness)
        return "greet_by_likeness", SkillHypothesis(
            text=f"Hello again, {name}!" if name else "Hi! I'm Chorus. What's your name?",
            confidence=likeness,
            human_attributes={} if name else {"greeting_stage": "asked_name"},
        )
    return None


def replies_to_name_question(dialog: DialogView) -> bool:
    """The turn answers the script's own name question: the bot's last line was this
    skill's and asked it, and the script still waits for the name."""
    last = dialog.bot_utterance
    return (
        dialog.human.attributes.get("greeting_stage") == "asked_name"
        and last is not None
        and last.active_skill == "greeting"
        and asked_name(last.text)
    )


#: A letter of any alphabet ("Rūta", "Līga", "Šani"), or a quote or dash inside a word.
_LETTER = r"(?:[^\W\d_]|['-])"
#: A word in a reply, ending on a full stop when it has one (:func:`name_anywhere`).
_ANY_WORD = re.compile(rf"({_LETTER}{{2,30}})(\.?)")
#: After a word, another in the same clause.
_GOES_ON = re.compile(r"\s+\w")
#: Where a reply's first clause ends (:func:`first_clause_name`).
_CLAUSE_ENDS = re.compile(r"[,.!?;:(\u2013\u2014]")


def name_anywhere(text: str) -> str | None:
    """In a short reply to the name question, a word that is a first name of some language
    (:mod:`shared.first_names`) wherever it stands, not a common word nor a place ("Ines
    from Porto", "Aiko desu"): capitalised, or not an English word ("oskar is the name");
    else a capitalised word that is no English word ("Haruto desu", "mera naam Sunil
    hai"). A word of grammar that goes on into its clause is the sentence's ("My name is
    ...": "My" is a first name in some lists), though alone it may be a name ("Will.").
    Only where the turn's reading is sure the reply is the greeting's
    (:func:`by_reading`): elsewhere the first word is any sentence's capital."""
    text = uncapitalised(text)
    found = list(_ANY_WORD.finditer(text))
    words = [m.group(1) for m in found]
    # a short word with a full stop is a title or an abbreviation ("Mr. Patel", "Dr."), no name
    titles = {m.group(1) for m in found if m.group(2) and len(m.group(0)) <= 4}
    if not 0 < len(words) <= NAMED_WORDS:
        return None
    names = first_names.first_names()
    kept = [
        word
        for place, (word, match) in enumerate(zip(words, found, strict=True))
        # "from Porto", "in Paris": a place, though a name too
        if not (place and words[place - 1].lower() in _PLACES_AFTER)
        and not is_common_word(word)
        and not (word.lower() in ENGLISH_STOP_WORDS and _GOES_ON.match(text, match.end()))
    ]
    for word in kept:
        if word.lower() in names and (word[0].isupper() or not spelling.is_english(word)):
            return _name(word)
    # a name faker's locales lack, written as one: capitalised, and no English word
    # ("mera naam Sunil hai", "Haruto desu")
    for word in kept:
        if unknown_capitalised(word) and word not in titles:
            return _name(word)
    return None


def first_clause_name(text: str) -> str | None:
    """In a longer reply to the name question, the name its first clause gives
    (:func:`name_anywhere` on it): what the user says of themselves after their name takes
    more words than :func:`name_anywhere` reads whole ("Rūta, I make amber jewellery in the
    old town", "Sipho. night guard at a mall in joburg, dead quiet in here", "ravi teja
    here. QA, night shift for US client"); up to :data:`INTRODUCED_WORDS`. Only the first
    clause: a later one names places and people as often ("working Dubai construction").
    Only where the turn's reading is sure the reply is the greeting's (:func:`by_reading`)."""
    if len(text.split()) > INTRODUCED_WORDS:
        return None
    return name_anywhere(_CLAUSE_ENDS.split(text, maxsplit=1)[0])


def asks_instead_of_answering(text: str) -> bool:
    """Whether a reply to the name question asks a question of the user's own instead: it
    asks (:func:`shared.asking.asks`), gives no name (:func:`name_anywhere`), and does not
    point at the bot's question (:data:`_POINTS_AT_THE_QUESTION`: "does it matter", "why
    do you need my name") or asks about a subject besides (:func:`shared.asking.
    subject_words`: "Does it expose Prometheus metrics?"). Such a question is about the
    bot ("who is this", "what do i call you again", "whom am I speaking with?": small
    talk's line on who the bot is) or about anything else ("what should I get my sister
    for her 30th?"), and is for the skill or the LLM that answers it."""
    typed = spelling.unabbreviate(text)
    if not asks(spelling.normalise(text)) or name_anywhere(typed) is not None:
        return False
    about = _THE_QUESTIONS_WORDS | _ABOUT_ASKING
    return not _POINTS_AT_THE_QUESTION.search(typed) or subject_words(typed, about) >= SUBJECT_WORDS


def may_answer_by_reading(text: str, annotations: Mapping[str, Any]) -> bool:
    """Whether a reply to the name question may be read as the greeting's by the reading
    (:func:`by_reading`): the intents annotator reads no intent in it but a "no" (a dodge:
    "nope, you first"), it does not ask the bot how it is back nor a question of the
    user's own (:func:`asks_instead_of_answering`), and it does not say how the user is
    ("I'm bored": "I'm" before a common word, which :func:`extract_name` reads as no name
    either)."""
    if recognised_intent(annotations) not in (None, "no") or _ASKS_HOW_BACK.search(text):
        return False  # another intent; how the user is, asked back ("jól, köszi. you?")
    if asks_instead_of_answering(text):
        return False  # "who is this", "what should I get my sister for her 30th?"
    typed = spelling.unabbreviate(text)
    maybe = _MAYBE_NAME.search(typed)
    if maybe is not None and is_common_word(maybe.group(1)):
        return False
    return not says_how_they_are(typed)


#: A reply that opens on "I'm" and the two words after it.
_I_AM_THEN = re.compile(rf"^\W*(?:i\s+am|i'm|im)\s+({_LETTER}+)(?:\s+({_LETTER}+))?", re.I)
#: A reply that opens on "I'm" or "it's" and the word after it.
_I_AM_OR_ITS = re.compile(rf"^\W*(?:i\s+am|i'm|im|it's|its)\s+({_LETTER}+)", re.I)


def first_name_after_i_am(text: str) -> str | None:
    """In a reply to the name question, the first name of some language that "I'm" or
    "it's" opens it with, in any case and whatever follows ("im bob ross", "its rob mate",
    "im ella im 7"): words that are English too ("bob", "rob"), which :func:`name_anywhere`
    takes only capitalised, and not a common word ("im happy", "its fine"). Only where the
    turn's reading is sure the reply is the greeting's (:func:`by_reading`)."""
    return first_name_matched(_I_AM_OR_ITS, uncapitalised(text))


def name_in_reply(text: str) -> str | None:
    """The name a reply to the name question gives, where the turn's reading is sure the
    reply is the greeting's: anywhere in a short one (:func:`name_anywhere`), in a longer
    one's first clause (:func:`first_clause_name`), or after "I'm" or "it's"
    (:func:`first_name_after_i_am`)."""
    return name_anywhere(text) or first_clause_name(text) or first_name_after_i_am(text)


def says_how_they_are(text: str) -> bool:
    """Whether a reply to the name question opens on how the user is and gives no name: "I'm"
    and, in the next two words, a feeling or an intensifier of VADER's (not a negation: "im
    not telling" puts the name off), none of them a first name ("I'm pretty anxious about my
    exam", "im so tired today", but "im ella im 7", "im bob ross"), and no name found
    elsewhere (:func:`name_in_reply`). Small talk's, or the LLM's."""
    opens = _I_AM_THEN.match(text)
    if opens is None:
        return False
    names = first_names.first_names()
    said = [word.lower() for word in opens.groups() if word]
    if said[0] in names:
        return False
    feeling = any(w in FEELING_WORDS and w not in _NEGATIONS and w not in names for w in said)
    return feeling and name_in_reply(text) is None


def asked_how_before(dialog: DialogView) -> bool:
    """Whether the user's turn before this one asked how the bot is ("hi how are you"),
    which the script answered with its name question: the reply may say how the user is
    instead ("im ok i guess"), which is small talk's."""
    return reading.sure_intent_before(dialog) == "how_are_you"


def by_reading(
    text: str, annotations: Mapping[str, Any], asked_how: bool = False
) -> SkillHypothesis | None:
    """Right after the script asked the user's name, a reply none of its patterns read,
    when the turn's reading is sure it is the greeting's (:func:`shared.reading.
    reply_by_reading`) and the intents annotator reads no other intent in it: the name,
    if a first name of some language is in it (:func:`name_anywhere`: "Haruto desu",
    "Ines from Porto"); else a dodge ("not really in the mood for names", "nah skip
    that"), answered with why the bot asks; not after the user asked how the bot is
    (``asked_how``), where a reply with no name says how the user is. The confidence is
    the reading's probability,
    already a chance fitted on labelled turns (no curve of its own); ``routing`` says so
    for the inspector (``kind`` ``by_reading``)."""
    if not may_answer_by_reading(text, annotations):
        return None
    chance = reading.reply_by_reading("greeting", reading.of(annotations), reading.shipped())
    if chance is None:
        return None
    name = name_in_reply(spelling.unabbreviate(text))
    if name is None and asked_how:
        return None  # no name, after "how are you?" answered: how the user is, small talk's
    named = f"Nice to meet you, {name}! {TOPIC_QUESTION}"
    return _read(chance, name, named, WHY_ASK_LINE, {"greeting_stage": "done"})


def asks_about_a_subject(text: str) -> bool:
    """Whether ``text`` asks (:func:`shared.asking.asks`) about a subject of its own: it
    holds :data:`shared.asking.SUBJECT_WORDS` or more English words of four letters or
    more that are not stop words, feelings (VADER's lexicon) nor the bot's name
    (:func:`shared.asking.subject_words`: "morning! what's the capital of australia"). A
    greeting's usual company asks none ("Olá, tudo bem?", "evening chorus, you good?", "How
    far, Chorus?")."""
    if not asks(spelling.normalise(text)):
        return False
    # the words as typed (no guess at a word the dictionary lacks: "kabar" is no typo)
    typed = spelling.unabbreviate(text)
    return subject_words(typed, FEELING_WORDS | _THE_QUESTIONS_WORDS) >= SUBJECT_WORDS


def may_open_by_reading(text: str) -> bool:
    """Whether an opening turn may be read as a greeting by the reading
    (:func:`opens_by_reading`): it asks nothing of its own (:func:`asks_about_a_subject`). A
    greeting with a question of its own ("morning! what's the capital of australia") is
    the question's, whatever the reading finds greeting-like in it."""
    return not asks_about_a_subject(text)


def opens_by_reading(text: str, annotations: Mapping[str, Any]) -> SkillHypothesis | None:
    """A conversation's opening turn none of the script's patterns read, when the turn's
    reading is sure it is the greeting's and the intents annotator reads no intent in it
    (:func:`shared.reading.opens_by_reading`: "heyo bot", "hallo there bot", "ola, sou a
    Inês"): the script's first line, or a greeting by the name when the turn holds one
    (:func:`name_on_opening`). The confidence is the reading's probability; ``routing``
    says so for the inspector (``kind`` ``by_reading``)."""
    if not may_open_by_reading(text):
        return None
    intents = annotations.get("intents")
    chance = reading.opens_by_reading(
        "greeting",
        reading.of(annotations),
        intents if isinstance(intents, Mapping) else {},
        reading.shipped(),
    )
    if chance is None:
        return None
    given = name_on_opening(spelling.unabbreviate(text))
    named = f"Hi {given}, nice to meet you! I'm Chorus. {TOPIC_QUESTION}"
    return _read(chance, given, named, GREET, {"greeting_stage": "asked_name"})


def _read(
    chance: float, name: str | None, named: str, line: str, attributes: dict[str, str]
) -> SkillHypothesis:
    """An answer by the turn's reading, as sure as the reading: the ``named`` line, the
    ``name`` remembered, when the turn gives one; else ``line``, with ``attributes``.
    ``routing`` says so for the inspector (``kind`` ``by_reading``)."""
    hypothesis = (
        SkillHypothesis(
            text=named,
            confidence=chance,
            human_attributes={"name": name, "greeting_stage": "done"},
        )
        if name
        else SkillHypothesis(text=line, confidence=chance, human_attributes=attributes)
    )
    routing = {"skill": "greeting", "kind": reading.BY_READING, "raw": chance, "read": chance}
    setattr(hypothesis, "routing", routing)  # noqa: B010
    return hypothesis


service = Service(
    "greeting", description="Greets, asks the user's name, remembers it.", never_changes_view=True
)


@service.skill
async def greet(dialog: DialogView) -> list[SkillHypothesis]:
    said = [u.text for u in dialog.utterances[:-1] if u.speaker == "bot"]
    human = dialog.human_utterance
    asked = not said or asked_name(said[-1])
    explained = bool(said) and said[-1] == WHY_ASK_LINE
    hypothesis = respond(
        human.text, dialog.human.attributes, human.annotations, asked, explained, not said
    )
    if hypothesis is None and said and asked and replies_to_name_question(dialog):
        # a reply to the name question no pattern read: the reading may still say
        hypothesis = by_reading(human.text, human.annotations, asked_how_before(dialog))
    if hypothesis is None and not said:
        # an opening turn no pattern read: the reading may still say it greets
        hypothesis = opens_by_reading(human.text, human.annotations)
    return [hypothesis] if hypothesis else []


app = service.app
# the spelling dictionary and the first names loaded at start-up, not on the first turn
spelling.warm()
first_names.first_names()
