"""Write tests/data/dp_agent/ (or dp_agent_cea048e/): a database written by DeepPavlov Agent
itself, dumped as MongoDB Extended JSON, for the test of ``chorus import --from-dp-agent``.

    .venv/bin/python tools/dp_agent_fixture.py [--release 2.2.0|cea048e] [--package SPEC]
        [--mongodb mongodb://host:port]

Two releases write it: 2.2.0, the last on PyPI, and cea048e (2.3.0a), the commit Dream's
agent image installs. cea048e has no package on PyPI: it is installed from its git commit
(``--package`` names another source of the same commit, such as a local clone checked
out at it: ``--package /path/to/dp-agent``). Its state manager also
stores the bot utterance's ``orig_text`` and ``attributes``, JSON-encodes dates inside
utterance attributes when it saves them, and has Dream's two extended methods, which the
writer then calls too.

The dialogs are written by dp-agent's own ``StateManager`` (the methods its pipeline calls
on every turn: the human utterance, annotations, hypotheses, the chosen answer merged into
the profile and attributes, saving; ratings and closing a dialog as its HTTP API does), in
a scratch virtual environment with ``deeppavlov-agent==2.2.0`` from PyPI (the release Dream
runs; its state manager is unchanged since) and the MongoDB driver it uses, ``motor``. Its
pinned aiohttp 3.6 and motor 2.0 do not install or import on Python 3.11, and the state
manager needs neither aiohttp nor anything of motor 2 that motor 3 lacks (``insert_one``,
``update_one``, ``find``, ``distinct``, ``create_index``), so the package is installed
without its dependencies and motor 3.7 beside it. Nothing of dp-agent is copied here or committed:
the scratch environment lives in a temporary directory, and only the data it wrote is kept.

Without ``--mongodb`` a FerretDB is started as the tests start it (tests/support).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

from bson import json_util
from pymongo import MongoClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data"
#: Where each release's database goes, and the package that is that release.
RELEASES = {
    "2.2.0": (DATA / "dp_agent", "deeppavlov-agent==2.2.0"),
    "cea048e": (
        DATA / "dp_agent_cea048e",
        "git+https://github.com/deeppavlov/dp-agent@cea048eb2c421649a534321dd570dc52e90da0b7",
    ),
}
#: dp-agent's collections (``collection_name`` of its state schema's classes).
COLLECTIONS = ("user", "bot", "dialog", "human_utterance", "bot_utterance")
DEPENDENCIES = ("motor==3.7.1", "pyyaml>=5")

#: Run inside the scratch environment: dp-agent's StateManager writes the dialogs.
WRITER = textwrap.dedent(
    '''
    import asyncio
    import sys

    from motor.motor_asyncio import AsyncIOMotorClient

    from deeppavlov_agent.core import state_manager
    from deeppavlov_agent.core.state_manager import StateManager

    #: cea048e (2.3.0a), which Dream runs, has the methods Dream's pipelines name
    EXTENDED = getattr(state_manager, "ExtendedStateManager", None)


    async def turn(sm, user, text, annotations, hypotheses, chosen):
        """One turn as dp-agent's pipeline makes it (its services' outputs given here)."""
        dialog = await sm.get_or_create_dialog(user, "http_client")
        await sm.add_human_utterance(dialog, text, "input", message_attrs={"source": "test"})
        for label, payload in annotations.items():
            await sm.add_annotation(dialog, payload, label)
        for label, payload in hypotheses:
            await sm.add_hypothesis(dialog, payload, label)
        await sm.add_bot_utterance(dialog, chosen, "response_selector")
        await sm.save_dialog(dialog, None, "save")
        return dialog


    async def main(url):
        client = AsyncIOMotorClient(url)
        sm = (EXTENDED or StateManager)(client.get_default_database())
        await sm.prepare_db()
        hello = {"text": "Hi! What is your name?", "confidence": 0.9,
                 "human_attributes": {"greeted": True, "name": "Ann"},
                 "bot_attributes": {"persona_set": 1}}
        first = await turn(
            sm, "ann", "hello",
            {"spelling_preprocessing": "hello", "sentseg": {"punct_sent": "hello."},
             "badlisted_words": {"inappropriate": False, "profanity": False}},
            [("dff_greeting_skill", [hello]),
             ("dummy_skill", [{"text": "Sorry, I did not get that.", "confidence": 0.1,
                               "type": "dummy"}])],
            {**hello, "skill_name": "dff_greeting_skill"},
        )
        await turn(
            sm, "ann", "I like music.",
            {"spelling_preprocessing": "i like music.", "intent_catcher": {"yes": 0.0}},
            [("dff_music_skill", [{"text": "Me too! Jazz?", "confidence": 0.8,
                                   "human_attributes": {"likes": ["music"]}}])],
            {"text": "Me too! Jazz?", "confidence": 0.8, "skill_name": "dff_music_skill",
             "human_attributes": {"likes": ["music"]}},
        )
        bot = first.utterances[1].utt_id
        await sm.set_rating_utterance("ann", bot, 5)
        await sm.set_rating_dialog("ann", first.dialog_id, "good")
        await sm.drop_active_dialog("ann")
        await turn(
            sm, "ann", "hello again", {"spelling_preprocessing": "hello again"},
            [("dff_greeting_skill", [{"text": "Welcome back, Ann!", "confidence": 0.95}])],
            {"text": "Welcome back, Ann!", "confidence": 0.95, "skill_name": "dff_greeting_skill"},
        )
        await turn(
            sm, "bob smith/1", "what is the time?", {"spelling_preprocessing": "what is the time?"},
            [("dummy_skill", [{"text": "I cannot tell.", "confidence": 0.5}])],
            {"text": "I cannot tell.", "confidence": 0.5, "skill_name": "dummy_skill"},
        )
        if EXTENDED is not None:  # a Dream turn: the first-turn reset, attributes, a photo
            dialog = await sm.get_or_create_dialog("tg 42", "telegram")
            await sm.add_human_utterance(
                dialog, "", "input", message_attrs={"image": "http://files:3000/file?file=a.jpg"}
            )
            await sm.add_annotation_and_reset_human_attributes_for_first_turn(
                dialog, "", "spelling_preprocessing"
            )
            await sm.update_attributes(
                dialog, {"human_attributes": {"seen_photo": True}}, "dff_image_skill"
            )
            await sm.add_hypothesis(
                dialog, [{"text": "A cat!", "confidence": 0.7}], "dff_image_skill"
            )
            await sm.add_bot_utterance(
                dialog,
                {"text": "A cat!", "confidence": 0.7, "skill_name": "dff_image_skill",
                 "attributes": {"image": "http://files:3000/file?file=cat.jpg"}},
                "response_selector",
            )
            await sm.save_dialog(dialog, None, "save")
            await sm.set_rating_utterance("tg 42", dialog.utterances[1].utt_id, "like")


    asyncio.run(main(sys.argv[1]))
    '''
)


def scratch_python(directory: Path, package: str) -> Path:
    """A virtual environment with dp-agent's state manager and its MongoDB driver."""
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
    python = directory / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", package], check=True)
    subprocess.run([*pip, *DEPENDENCIES], check=True)
    return python


def dump(url: str, out: Path) -> None:
    """Each collection as a JSON array of canonical Extended JSON documents, in insertion
    order (ObjectIds, dates and numbers keep their BSON types)."""
    client: MongoClient[dict[str, object]] = MongoClient(url)
    db = client.get_default_database()
    out.mkdir(parents=True, exist_ok=True)
    options = json_util.JSONOptions(json_mode=json_util.JSONMode.CANONICAL, tz_aware=True)
    for name in COLLECTIONS:
        docs = list(db[name].find(sort=[("_id", 1)]))
        (out / f"{name}.json").write_text(
            json_util.dumps(docs, json_options=options, indent=1) + "\n", encoding="utf-8"
        )
        print(f"{name}: {len(docs)} document(s)")
    client.drop_database(db.name)
    client.close()


def write(server: str, package: str, out: Path) -> None:
    head, _, options = server.partition("?")
    url = f"{head.rstrip('/')}/dp_agent_{uuid.uuid4().hex[:8]}" + (f"?{options}" if options else "")
    with tempfile.TemporaryDirectory(prefix="dp-agent-") as scratch:
        python = scratch_python(Path(scratch) / "venv", package)
        writer = Path(scratch) / "writer.py"
        writer.write_text(WRITER)
        subprocess.run([str(python), str(writer), url], check=True, cwd=scratch)
    dump(url, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", choices=sorted(RELEASES), default="2.2.0")
    parser.add_argument("--package", help="pip's requirement for that release's package")
    parser.add_argument("--mongodb", help="a MongoDB or FerretDB server to write into")
    args = parser.parse_args()
    out, package = RELEASES[args.release]
    package = args.package or package
    if args.mongodb:
        write(args.mongodb, package, out)
        return
    from tests.support.mongo_server import running_mongodb

    with running_mongodb() as url:
        write(url, package, out)


if __name__ == "__main__":
    main()
