"""`chorus new skill`: in a copy of the repository, a new skill is written, registered in the
pipelines and docker compose (which stay valid), passes its own test, and answers through
the agent."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from typer.testing import CliRunner, Result

from agent.api.app import create_app
from agent.cli import stack
from agent.cli.knowledge import DEFAULT_OUT, DOCS, stale
from agent.cli.main import app as chorus_app
from agent.cli.scaffold import ScaffoldError, apply, plan_skill, render_json
from agent.kinds import load_any_pipeline
from agent.settings import Settings
from tests.conftest import SERVICE_TIMEOUT, TURN_TIMEOUT
from tests.deploy import test_compose
from tests.support.compose import containerised, without_targets
from tests.support.ports import free_port, port_is_free
from tests.support.processes import COMMAND_TIMEOUT, unmeasured_environment, wait_until_up
from tests.support.servers import serving

# The tests that run pytest again in a copy of the repository, or a stack of processes from
# one: one at a time (another waits), so that in `make test`'s parallel run two of them do
# not starve each other of CPU (docs/development.md). The others (a copy scaffolded and read,
# a command refused) run beside the rest of the suite.
COPIES = pytest.mark.one_at_a_time("copies")

ROOT = Path(__file__).resolve().parents[2]
NAME = "tortoise"  # a name no real skill of the repository will take
PIPELINE, COMPOSE_PIPELINE, COMPOSE = (
    Path("pipeline.json"),
    Path("deploy/pipeline.compose.json"),
    Path("docker-compose.yml"),
)
REGISTRIES = (PIPELINE, COMPOSE_PIPELINE, COMPOSE)


def copy_repository(into: Path) -> Path:
    """The working tree as git sees it (tracked files and new ones it does not ignore)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        shutil.copytree(
            ROOT,
            into,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(
                ".git", ".venv", "data", "build", "*.egg-info", ".*cache", "__pycache__"
            ),
        )
        return into
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # listed but deleted in the working tree: skip
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).write_bytes(source.read_bytes())
    copy_docs_index(into)
    return into


def copy_docs_index(into: Path) -> None:
    """The docs index `chorus run` builds (ignored by git), copied after the docs when it is
    up to date with this checkout's: the copy's `chorus run` and its knowledge tests find
    it fresh instead of embedding the docs again, seconds of CPU that nothing here checks
    (tests/cli/test_knowledge.py checks that build; tests/e2e/test_knowledge.py shares the
    index)."""
    paths = [ROOT / path for path in DOCS]
    index = ROOT / DEFAULT_OUT
    if not stale(paths, index):
        (into / DEFAULT_OUT).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(index, into / DEFAULT_OUT)


runner = CliRunner()


def chorus(repo: Path, *args: str, typed: str | None = None) -> Result:
    """`chorus ...` as run in the copy's root, with no CHORUS_* setting from outside, and
    ``typed`` as its input."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(repo)
        for key in [k for k in os.environ if k.startswith("CHORUS_")]:
            patch.delenv(key)
        return runner.invoke(chorus_app, list(args), input=typed)


def succeeded(result: Result) -> str:
    """What a command run with :func:`chorus` printed, once it succeeded."""
    assert result.exit_code == 0, result.output
    return result.stdout


def texts(repo: Path) -> dict[Path, str]:
    return {path: (repo / path).read_text() for path in REGISTRIES}


def port(entry: dict[str, Any]) -> int:
    number = urlsplit(str(entry["connector"]["url"])).port
    assert number is not None
    return number


def ports(pipeline: dict[str, Any]) -> set[int]:
    return {port(entry) for _, entry in containerised(pipeline).values()}


def only_added(old: str, new: str) -> bool:
    diff = difflib.ndiff(old.splitlines(), new.splitlines())
    return all(not line.startswith("- ") for line in diff)


@dataclasses.dataclass
class Scaffolded:
    repo: Path
    before: dict[Path, str]
    result: Result

    def read(self, path: Path) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.repo / path).read_text())
        return data


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Scaffolded:
    repo = copy_repository(tmp_path_factory.mktemp("repo"))
    before = texts(repo)
    return Scaffolded(repo, before, chorus(repo, "new", "skill", NAME))


def test_writes_the_skill_folder(scaffolded: Scaffolded) -> None:
    assert scaffolded.result.exit_code == 0, scaffolded.result.output
    folder = scaffolded.repo / "skills" / NAME
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["__init__.py", "app.py", "test_app.py", "README.md"]
    )
    app_lines = (folder / "app.py").read_text().splitlines()
    start = next(i for i, line in enumerate(app_lines) if "your code here" in line)
    end = next(i for i, line in enumerate(app_lines) if "end of your code" in line)
    assert 0 < end - start - 1 < 15, "the user's code is short and marked"
    assert re.search(rf'Service\(\s*"{NAME}"', "\n".join(app_lines))
    # An author outside this repository has the SDK, not our tests/support: the generated
    # tests pass in a copy with no tests/ (test_a_moved_stack_takes_a_new_skill_...).
    generated = (folder / "test_app.py").read_text()
    assert "tests.support" not in generated
    assert "from agent.sdk.testing import" in generated
    out = scaffolded.result.stdout
    assert f"pipeline.json                 services.skills.{NAME}: http://127.0.0.1:" in out
    assert f"skills/{NAME}/app.py" in out and "make run" in out and "chorus chat" in out


def test_registers_the_skill_in_both_pipelines(scaffolded: Scaffolded) -> None:
    before = json.loads(scaffolded.before[PIPELINE])
    after = scaffolded.read(PIPELINE)
    entry = after["services"]["skills"].pop(NAME)
    assert after == before and list(after) == list(before), "nothing else changed"
    siblings = before["services"]["skills"].values()
    assert entry["connector"]["url"] == f"http://127.0.0.1:{port(entry)}/respond"
    assert 8200 <= port(entry) < 8300
    assert port(entry) not in ports(before)
    assert entry["connector"]["timeout"] in {s["connector"]["timeout"] for s in siblings}
    assert entry["context_window"] in {s["context_window"] for s in siblings}

    compose = scaffolded.read(COMPOSE_PIPELINE)
    assert compose["services"]["skills"][NAME]["connector"]["url"] == (
        f"http://{NAME}:8000/respond"
    )
    assert without_targets(compose) == without_targets(scaffolded.read(PIPELINE))
    for path in (PIPELINE, COMPOSE_PIPELINE):  # same layout: only the entry's lines added
        assert only_added(scaffolded.before[path], (scaffolded.repo / path).read_text())


def test_registers_the_skill_in_docker_compose(scaffolded: Scaffolded) -> None:
    text = (scaffolded.repo / COMPOSE).read_text()
    assert only_added(scaffolded.before[COMPOSE], text), "comments and layout stay"
    services = yaml.safe_load(text)["services"]
    new, greeting = services[NAME], services["greeting"]
    assert new["build"] == {
        "context": ".",
        "dockerfile": "deploy/service.Dockerfile",
        "args": {"SERVICE": f"skills/{NAME}"},
    }, "no Dockerfile of its own"
    assert new["build"] == {**greeting["build"], "args": {"SERVICE": f"skills/{NAME}"}}, (
        "the greeting skill's pattern"
    )
    assert new["restart"] == greeting["restart"]
    assert new["healthcheck"] == greeting["healthcheck"]
    assert services["agent"]["depends_on"][NAME] == {"condition": "service_healthy"}
    assert f"  {NAME}:\n    <<: *service\n" in text


def compose_cases(services: set[str]) -> list[str]:
    """tests/deploy/test_compose.py's cases that a change to ``services`` (folder names) can
    break: each case of those services, and every check across files. The agent image's
    checks are left out: the agent code did not change, and the compose pipeline's validity
    is a check of its own. The other services' cases run in this suite, on files the copy
    shares with this checkout."""
    module = "tests/deploy/test_compose.py"
    cases = []
    for name in dir(test_compose):
        function = getattr(test_compose, name)
        if not name.startswith("test_") or not callable(function) or "agent_image" in name:
            continue
        marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
        if marks and marks[0].args[0] == "service":  # one case per compose service
            cases += [f"{module}::{name}[{s}]" for s in sorted(services)]
        else:
            cases.append(f"{module}::{name}")
    return cases


@pytest.fixture
def new_skill(scaffolded: Scaffolded) -> Iterator[tuple[str, dict[str, Any]]]:
    """The new skill started as `chorus run` starts it: found by folder convention from the
    copy's pipeline, on its registered port (another if something here already uses it)."""
    pipeline = load_any_pipeline(scaffolded.repo / PIPELINE)
    found = pipeline.local_services(scaffolded.repo).startable
    (service,) = [s for s in found if s.name == NAME]
    assert service.module == f"skills.{NAME}.app:app"
    if not port_is_free(service.port):
        service = dataclasses.replace(service, port=free_port())
    entry = scaffolded.read(PIPELINE)["services"]["skills"][NAME]
    entry["connector"]["url"] = f"http://127.0.0.1:{service.port}/respond"
    process = stack.start(service, scaffolded.repo)
    try:
        stack.wait_healthy(service, process)
        yield service.name, entry
    finally:
        stack.stop([process])


def test_the_new_skill_answers_through_the_agent(
    new_skill: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    name, entry = new_skill
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps(
            {
                "services": {
                    "skills": {name: entry},
                    "response_selectors": {
                        "best": {"connector": {"builtin": "highest_confidence"}}
                    },
                }
            }
        )
    )
    agent = create_app(Settings(db_url=f"sqlite:///{tmp_path}/chorus.db", pipeline=pipeline))
    with serving(agent) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        first = client.post("/", json={"user_id": "u", "payload": f"Hi {NAME}!"}).json()
        second = client.post("/", json={"user_id": "u", "payload": f"{NAME} again"}).json()
    assert first["active_skill"] == NAME
    assert first["response"] == f"This is the {NAME} skill. Mentions so far: 1."
    assert second["response"] == f"This is the {NAME} skill. Mentions so far: 2.", (
        "the count came back through the human attributes"
    )


# -- refusals ---------------------------------------------------------------------------------


@pytest.fixture
def repo(scaffolded: Scaffolded) -> Path:
    return scaffolded.repo


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (NAME, f"skills/{NAME}/ already exists"),
        ("greeting", "skills/greeting/ already exists"),
        ("tokens", "annotators/tokens/ already exists"),
        ("Weather", "bad skill name 'Weather': use 1-30 lowercase letters and digits"),
        ("dice_roller", "bad skill name 'dice_roller'"),
        ("2dice", "bad skill name '2dice'"),
        ("class", "bad skill name 'class': it is a Python keyword"),
        ("skills", "bad skill name 'skills': the name is reserved"),
        ("mongo", "the name is reserved"),
    ],
)
def test_refuses_a_bad_or_taken_name_touching_nothing(repo: Path, name: str, message: str) -> None:
    before = texts(repo)
    folders = sorted(str(p.relative_to(repo)) for p in repo.glob("*/*") if p.is_dir())
    result = chorus(repo, "new", "skill", name)
    assert result.exit_code == 2
    assert message in result.stderr
    assert texts(repo) == before
    assert sorted(str(p.relative_to(repo)) for p in repo.glob("*/*") if p.is_dir()) == folders


def test_refuses_a_name_the_pipeline_already_uses(repo: Path, tmp_path: Path) -> None:
    """A service running elsewhere has no folder here, but its name is still taken."""
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(
        json.dumps(
            {
                "services": {
                    "skills": {"remote": {"connector": {"url": "http://10.0.0.7:9000/respond"}}}
                }
            }
        )
    )
    result = chorus(repo, "new", "skill", "remote", "--pipeline", str(pipeline))
    assert result.exit_code == 2
    assert "a service named 'remote' already exists" in result.stderr
    assert not (repo / "skills" / "remote").exists()


def test_refuses_a_broken_pipeline_naming_the_entry(repo: Path, tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(json.dumps({"services": {"skills": {"s": {"connector": {}}}}}))
    result = chorus(repo, "new", "skill", "dice", "--pipeline", str(pipeline))
    assert result.exit_code == 2
    assert "services.skills.s.connector: missing url" in result.stderr
    assert not (repo / "skills" / "dice").exists()


def test_refuses_a_compose_file_it_cannot_edit_touching_nothing(tmp_path: Path) -> None:
    """A compose file laid out otherwise (here: the agent without a ``depends_on:``
    mapping) fails the command on the files (exit 1), naming the file and what is missing."""
    repo = copy_repository(tmp_path)
    compose = repo / "docker-compose.yml"
    compose.write_text(compose.read_text().replace("    depends_on:\n", "    needs:\n", 1))
    before = texts(repo)
    result = chorus(repo, "new", "skill", "dice")
    assert result.exit_code == 1, result.output
    assert "docker-compose.yml: the agent service has no `depends_on:` mapping" in result.stderr
    assert texts(repo) == before
    assert not (repo / "skills" / "dice").exists()


def test_a_pipeline_the_agent_cannot_load_is_rolled_back(repo: Path) -> None:
    """If a written file does not load, every file is put back and the folder removed."""
    before = texts(repo)
    plan = plan_skill(repo, "dice", repo / PIPELINE)
    broken = {**plan.edits, repo / COMPOSE_PIPELINE: '{"services": {"skills": 1}}\n'}
    with pytest.raises(ScaffoldError, match="every change was undone"):
        apply(dataclasses.replace(plan, edits=broken))
    assert texts(repo) == before
    assert not (repo / "skills" / "dice").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--port", "0"], "bad --port 0: a TCP port is 1-65535"),
        (["--port", "65536"], "bad --port 65536: a TCP port is 1-65535"),
        (["--port", "TAKEN"], f"--port TAKEN is taken by services.skills.{NAME} in "),
        (["--port", "9", "--in-process"], "--port and --in-process do not go together"),
    ],
)
def test_refuses_a_port_that_is_not_one_or_is_taken_touching_nothing(
    scaffolded: Scaffolded, options: list[str], message: str
) -> None:
    """A port another entry of the pipeline has (here the skill scaffolded first) would
    start two services on one port: refused before anything is written."""
    taken = str(port(scaffolded.read(PIPELINE)["services"]["skills"][NAME]))
    options = [taken if o == "TAKEN" else o for o in options]
    message = message.replace("TAKEN", taken)
    before = texts(scaffolded.repo)
    result = chorus(scaffolded.repo, "new", "skill", "dice", *options)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert texts(scaffolded.repo) == before
    assert not (scaffolded.repo / "skills" / "dice").exists()


def test_a_port_held_on_the_machine_is_taken_with_a_warning(tmp_path: Path) -> None:
    """Something listening there now may be gone when `make run` starts: the port is the
    user's choice, but the output says the skill cannot start while it is held."""
    repo = copy_repository(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", free_port()))
        holder.listen()
        held = holder.getsockname()[1]
        result = chorus(repo, "new", "skill", "held", "--port", str(held))
    assert result.exit_code == 0, result.output
    assert f"Port {held} is in use on this machine now" in result.stdout
    entry = json.loads((repo / PIPELINE).read_text())["services"]["skills"]["held"]
    assert entry["connector"]["url"] == f"http://127.0.0.1:{held}/respond"


def test_a_second_skill_takes_another_free_port(tmp_path: Path) -> None:
    repo = copy_repository(tmp_path)
    taken = ports(json.loads((repo / PIPELINE).read_text()))
    for name in ("dice", "quiz"):
        apply(plan_skill(repo, name, repo / PIPELINE))
    skills = json.loads((repo / PIPELINE).read_text())["services"]["skills"]
    assert taken.isdisjoint({port(skills["dice"]), port(skills["quiz"])})
    assert 8200 < port(skills["dice"]) < port(skills["quiz"]) < 8300


# -- the walkthrough of docs/adding-a-skill.md ---------------------------------------------

DOC = ROOT / "docs" / "adding-a-skill.md"


def doc_blocks(language: str) -> list[str]:
    """The fenced code blocks of the walkthrough in ``language``."""
    text = DOC.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def doc_block(language: str, containing: str) -> str:
    (block,) = [b for b in doc_blocks(language) if containing in b]
    return block


SERVICE_GROUPS = ("annotators", "skills", "skill_selectors", "response_selectors")


def changed_services(repo: Path) -> list[str]:
    """The service folders of the copy ``repo`` that differ from this checkout's (new ones
    included), as paths relative to it."""
    changed = []
    for group in SERVICE_GROUPS:
        for folder in sorted(p for p in (repo / group).iterdir() if p.is_dir()):
            files = [f for f in folder.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
            for copied in files:
                ours = ROOT / copied.relative_to(repo)
                if not ours.is_file() or ours.read_bytes() != copied.read_bytes():
                    changed.append(str(folder.relative_to(repo)))
                    break
    return changed


@COPIES
@pytest.mark.timeout(600)
def test_following_the_docs_keeps_every_test_green(tmp_path: Path) -> None:
    """A newcomer's path through docs/adding-a-skill.md, in a copy of the repository: the
    weather skill scaffolded, its code and first test replaced by the docs', the weather
    intent added to the intents annotator and routed in rules.json. Then lint, the tests of
    every service the path changed, of the default bot and of the compose file (its checks
    across files and the changed services' cases) stay green,
    and the skill passes the test the docs give it. A service the path leaves as it is runs
    the same tests in this suite (its tests import only its own folder), so they are not
    run a second time here, nor are the compose file's cases of those services: that was
    most of the slowest test of the suite."""
    repo = copy_repository(tmp_path / "repo")
    assert chorus(repo, "new", "skill", "weather").exit_code == 0
    skill = repo / "skills" / "weather"
    (skill / "app.py").write_text(doc_block("python", 'Service("weather"'))
    tests = (skill / "test_app.py").read_text()
    docs_test = doc_block("python", "def test_tells_the_weather")
    (skill / "test_app.py").write_text(tests + "\n\n" + docs_test)

    intents_path = repo / "annotators" / "intents" / "intents.json"
    intents = json.loads(intents_path.read_text())
    intents |= json.loads("{" + doc_block("json", '"weather": {') + "}")
    intents_path.write_text(json.dumps(intents, indent=2))
    assert '"weather": ["weather"],' in doc_block("json", '"weather": ["weather"]')
    rules_path = repo / "skill_selectors" / "rules" / "rules.json"
    rules = json.loads(rules_path.read_text())
    rules["intents"]["weather"] = ["weather"]
    rules_path.write_text(json.dumps(rules, indent=2))

    env = unmeasured_environment("CHORUS_")  # a copy of the repository
    changed = changed_services(repo)
    folders = ["agent", *SERVICE_GROUPS, "tests"]
    for check in (["check"], ["format", "--check"]):  # as `make lint` runs them
        lint = subprocess.run(
            [sys.executable, "-m", "ruff", *check, *folders],
            cwd=repo,
            capture_output=True,
            text=True,
            check=False,
        )
        assert lint.returncode == 0, lint.stdout
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",  # each passed test named, the docs' own among them
            "-p",
            "no:cacheprovider",
            "-k",
            "not mongodb",
            *changed,
            "tests/e2e",
            # the skill in compose, and the services the path changed (replicas: unrelated)
            *compose_cases({Path(folder).name for folder in changed}),
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    # The test the docs give the skill ran among them, and passed: no second run for it.
    docs_case = "skills/weather/test_app.py::test_tells_the_weather_and_remembers_the_city"
    assert f"PASSED {docs_case}" in result.stdout, result.stdout[-4000:]
    # The services the path edits are among those tested (a sign the comparison works).
    assert {"skills/weather", "annotators/intents", "skill_selectors/rules"} <= set(changed)
    routed = subprocess.run(
        [sys.executable, "-c", UMBRELLA_THROUGH_THE_SERVICES],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert routed.returncode == 0, routed.stderr[-2000:]
    intent, decision, answer = json.loads(routed.stdout)
    assert intent["intent"] == "weather"
    assert intent["confidence"] >= rules["min_intent_confidence"]
    assert "weather" in decision["skills"]
    assert [h["text"] for h in answer] == ["Which city? I know Paris, London and Tokyo."]


#: The docs' question without the word "weather", through the services of a turn as the
#: agent chains them: the intents annotator, the rules, the weather skill.
UMBRELLA_THROUGH_THE_SERVICES = """
import json
from agent.sdk.testing import ServiceClient, view
from annotators.intents.app import app as intents
from skill_selectors.rules.app import app as rules
from skills.weather.app import app as weather
text = "do I need an umbrella"
with ServiceClient(intents) as i, ServiceClient(rules) as r, ServiceClient(weather) as w:
    (intent,) = i.respond(view(text))
    said = view(text, annotations={"intents": intent, "badwords": {"toxic": False}})
    (decision,) = r.respond(said)
    (answer,) = w.respond(said)
print(json.dumps([intent, decision, answer]))
"""


# -- a moved stack takes a new skill, without a hand edit -------------------------------------

#: A skill that answers at random, as a dice roller does: its text, confidence and
#: attribute differ from call to call, so a generated test that compared answers would pass
#: only by luck.
RANDOM_DICE = '''"""The dice skill: a die rolled at random when the user mentions dice."""

from __future__ import annotations

import random

from agent.sdk import DialogView, Service, SkillHypothesis

service = Service("dice", description="Rolls a die when the user mentions dice.")


@service.skill
def respond(dialog: DialogView) -> list[SkillHypothesis]:
    if "dice" not in dialog.human_utterance.text.lower():
        return []
    roll = random.randint(1, 6)
    return [
        SkillHypothesis(
            text=f"You rolled a {roll}.",
            confidence=random.uniform(0.95, 1.0),
            human_attributes={"dice_last_roll": roll},
        )
    ]


app = service.app
'''


def start_stack(repo: Path, agent_port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`make run RUN_ARGS="--port <agent_port>"` in ``repo``: the installed script."""
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "chorus"), "run", "--port", str(agent_port)],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until_up(f"http://127.0.0.1:{agent_port}/ping", process)
    return process


def stop_stack(process: subprocess.Popen[bytes]) -> str:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=COMMAND_TIMEOUT)
    assert process.returncode == 0
    return out.decode()


def run_in(repo: Path, env: dict[str, str], *args: str, typed: str = "") -> str:
    """A command run in ``repo`` as a user runs it; its output, once it succeeded."""
    result = subprocess.run(
        args, cwd=repo, env=env, input=typed, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@COPIES
@pytest.mark.timeout(900)
def test_a_moved_stack_takes_a_new_skill_without_hand_edits(tmp_path: Path) -> None:
    """The newcomer's path on a machine whose usual ports are taken: the agent moved with
    `--port`, `chorus chat` finds it without `--url`; `chorus new skill` registers one
    skill on a port of its choosing and one in the agent's process; their generated tests
    pass unedited, the dice skill's too once it answers at random; after a restart both
    skills answer in the chat, and lint passes on them. No pipeline file is edited by hand.
    The copy has no tests/ folder, as an author outside this repository has the SDK and not
    our tests/support: the generated tests pass with ``agent.sdk.testing`` alone. (A new
    skill's compose cases run in test_following_the_docs_keeps_every_test_green's copy: the
    weather skill's.)"""
    repo = copy_repository(tmp_path / "repo")
    shutil.rmtree(repo / "tests")
    # Set-up, not the path: the tests' timeouts, as a busy machine misses the shipped ones.
    shipped = json.loads((repo / PIPELINE).read_text())
    for group in shipped["services"].values():
        for entry in group.values():
            entry["connector"]["timeout"] = SERVICE_TIMEOUT
    shipped["turn_timeout"] = TURN_TIMEOUT
    (repo / PIPELINE).write_text(render_json(shipped) + "\n")
    before = (repo / PIPELINE).read_text()
    env = {
        **unmeasured_environment("CHORUS_", "LLM_"),  # a copy of the repository
        "CHORUS_DB_URL": f"sqlite:///{tmp_path}/chorus.db",
    }
    agent_port, dice_port = free_port(), free_port()

    # The stack as `make run` starts it, in a process; `chorus chat` and `chorus new skill`
    # in this one (their own code, run in the copy's root, as the other tests here run
    # them): a `chorus` process is a second and a half of CPU importing the agent.
    stack_process = start_stack(repo, agent_port, env)
    try:
        hello = succeeded(chorus(repo, "chat", typed="Hello!\n"))
        assert "bot [greeting]:" in hello, "chat found the moved agent without --url"
        succeeded(chorus(repo, "new", "skill", "dice", "--port", str(dice_port)))
        succeeded(chorus(repo, "new", "skill", "coin", "--in-process"))
        # The dice skill answers at random before its generated test runs: that test must
        # pass on it unedited; the coin skill's passes on its generated app, unedited.
        (repo / "skills" / "dice" / "app.py").write_text(RANDOM_DICE)
        generated = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        ran = run_in(repo, env, *generated, "skills/dice", "skills/coin")
        assert "10 passed" in ran, ran  # five generated tests each, none failed
        for check in (["check"], ["format", "--check"]):  # as `make lint` runs them
            run_in(repo, env, sys.executable, "-m", "ruff", *check, "skills/coin", "skills/dice")
    finally:
        stop_stack(stack_process)

    skills = json.loads((repo / PIPELINE).read_text())["services"]["skills"]
    assert skills["dice"]["connector"]["url"] == f"http://127.0.0.1:{dice_port}/respond"
    assert skills["coin"]["connector"]["module"] == "skills.coin.app"
    assert only_added(before, (repo / PIPELINE).read_text()), "only the two entries added"
    compose = json.loads((repo / COMPOSE_PIPELINE).read_text())["services"]["skills"]
    assert compose["coin"]["connector"]["url"] == "http://coin:8000/respond", "a container"

    stack_process = start_stack(repo, agent_port, env)
    try:
        chat = succeeded(chorus(repo, "chat", typed="roll the dice\ncoin?\n"))
    finally:
        out = stop_stack(stack_process)
    assert f"  dice                 http://127.0.0.1:{dice_port}\n" in out
    assert "  coin                 in the agent (skills.coin.app)\n" in out
    assert re.search(r"^bot \[dice\]: You rolled a [1-6]\.$", chat, flags=re.M), chat
    assert "bot [coin]: This is the coin skill. Mentions so far: 1." in chat
