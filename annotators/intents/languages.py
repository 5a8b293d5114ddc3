"""Greetings in other languages, from the open dialog corpus the project already ships.

The intents' patterns and examples are English, and so is the embedding that reads their
meaning (:mod:`shared.meaning`: "Hola" means nothing to it). People open a conversation in
their own language all the same ("Hola", "Hallo! Ich bin Jonas", "oi, tudo bom?"), and
such an opening went to the LLM, or to the fallback without one. ``chatterbot-corpus``
(BSD, already small talk's corpus) holds a ``greetings`` file in 27 languages besides
English; the statements that open its conversations are greetings, "how are you"s and
"nice to meet you"s, which label rule 4 (bench/data/routing/README.md) gives to the
greeting either way. They are read here by wording only (TF-IDF over words and over
characters, :mod:`shared.tfidf`), with no hand-made list of foreign phrases.

Only a conversation's **opening** turn is read this way (the annotator asks only when
the bot has said nothing yet): some of those words say goodbye as well
("ciao"), and later in a conversation that is what they mostly say; opening it, a word
of these files is a greeting. Statements the English intents already read are left out:
the English reading has them.
"""

from __future__ import annotations

import importlib.resources

import yaml

#: The corpus's folder of the language the intents are written in: its greetings are theirs.
ENGLISH = "english"
#: The similarity (words and characters, averaged) from which an opening turn is a greeting:
#: on the opening turns of dev, train and train2, greetings in other languages score 0.58
#: and up ("Guten Tag!" ~ "Guten Morgen!"), English turns no intent reads 0.35 at most.
FLOOR = 0.5
#: Under this likeness to the English intents' examples, an opening turn is not near any
#: of them (the English reading of "Hola" is 0.07, "hii kaise ho" 0.2, "later!" 0.46):
#: only then is it read as another language's greeting.
ENGLISH_NEAR = 0.3


def corpus_greetings() -> list[str]:
    """The statements opening the conversations of the corpus's greetings files, in every
    language but English, each once."""
    root = importlib.resources.files("chatterbot_corpus") / "data"
    found: list[str] = []
    for language in sorted(root.iterdir(), key=lambda entry: entry.name):
        if language.name == ENGLISH or not language.is_dir():
            continue
        for entry in sorted(language.iterdir(), key=lambda entry: entry.name):
            if not entry.name.startswith("greeting") or not entry.name.endswith(".yml"):
                continue
            document = yaml.safe_load(entry.read_text(encoding="utf-8")) or {}
            for conversation in document.get("conversations") or []:
                if conversation and isinstance(conversation[0], str):
                    found.append(conversation[0].strip())
    return [statement for statement in dict.fromkeys(found) if statement]
