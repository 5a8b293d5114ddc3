"""``chorus new skill NAME``: a working skill in a new folder, registered where it must be.

What it writes, all or nothing (every file is worked out before the first is written; if a
write fails or the written pipeline does not load, the originals are put back and the new
folder removed):

* ``skills/NAME/``: ``__init__.py``, ``app.py``, ``test_app.py``, ``README.md``, from
  ``templates/skill/`` (its image is ``deploy/service.Dockerfile``, as for every service);
* the local pipeline (``pipeline.json``, ``CHORUS_PIPELINE`` or ``--pipeline``):
  ``services.skills.NAME`` at ``http://127.0.0.1:<port>/respond``, which ``chorus run`` then
  starts by folder convention as a process of its own (``--port``, or the first 82xx port
  the pipeline does not use and nothing on this machine holds); or, with ``--in-process``,
  by module (``skills.NAME.app``), which the agent runs in its own process;
* ``deploy/pipeline.compose.json``: the same entry at ``http://NAME:8000/respond``;
* ``docker-compose.yml``: a service block and an ``agent.depends_on`` entry, inserted as
  text so the file's comments and layout stay (:mod:`agent.cli.compose_text`).

The two compose files go together: when either is missing, neither is touched.
"""

from __future__ import annotations

import copy
import json
import keyword
import re
import shutil
import socket
from collections import Counter
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer

from agent.cli.compose_text import (
    COMPOSE_FILE,
    ComposeTextError,
    compose_services,
    compose_with_skill,
)
from agent.pipeline.config import parse_pipeline_config
from agent.pipeline.graph import build_pipeline
from agent.pipeline.kind import GROUP_FOLDERS
from agent.sdk.errors import ChorusError
from agent.sdk.models import JsonDict
from agent.sdk.roles import ROLES
from agent.settings import SettingsError, load_settings
from agent.turn.config import PipelineConfigError

#: A Python package name and a host name on the compose network (no ``_``: the compose
#: tests hold service names to DNS labels), short enough for the template's lines.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]{0,29}$")
#: Compose services that are not pipeline services, and the repository's own folders.
RESERVED = frozenset({"agent", "mongo", "deploy", "docs", "tests", "bench", "tools"})
SKILL_PORTS = range(8201, 8300)
SERVICE_PORT = 8000
COMPOSE_PIPELINE = Path("deploy") / "pipeline.compose.json"
TEMPLATE_FILES = ("__init__.py", "app.py", "test_app.py", "README.md")
#: Used when the pipeline has no skill to copy them from.
DEFAULT_TIMEOUT = 1.0
DEFAULT_CONTEXT_WINDOW = 3
JSON_WIDTH = 100


class ScaffoldError(ChorusError):
    """The skill cannot be added; nothing was changed. Exit code 2 blames the command line,
    1 the files it would edit."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Plan:
    """Everything ``new skill`` will write, worked out before anything is."""

    name: str
    folder: Path
    new_files: dict[str, str]
    #: file -> its new text, and what changes in it (for the report)
    edits: dict[Path, str]
    changes: dict[Path, str]
    #: the edited pipeline files, read back as the agent will once written
    pipelines: tuple[Path, ...]
    notes: list[str] = field(default_factory=list)


# -- the name -------------------------------------------------------------------------------


def check_name(name: str) -> None:
    """Refuse a name that is not a clean package and host name, or is reserved."""
    if not NAME_PATTERN.fullmatch(name):
        raise ScaffoldError(
            f"bad skill name {name!r}: use 1-30 lowercase letters and digits, starting with a "
            "letter (it names a Python package and a docker compose host), e.g. weather",
            exit_code=2,
        )
    if keyword.iskeyword(name):
        raise ScaffoldError(f"bad skill name {name!r}: it is a Python keyword", exit_code=2)
    if name in RESERVED or name in ROLES or name in GROUP_FOLDERS.values():
        raise ScaffoldError(f"bad skill name {name!r}: the name is reserved", exit_code=2)


def check_unused(name: str, root: Path, taken: set[str]) -> None:
    """Refuse a name a folder or a registered service already has: nothing is overwritten."""
    for folder in sorted(set(GROUP_FOLDERS.values())):
        if (root / folder / name).exists():
            raise ScaffoldError(
                f"{folder}/{name}/ already exists; nothing was changed", exit_code=2
            )
    if name in taken:
        raise ScaffoldError(
            f"a service named {name!r} already exists in the pipeline or "
            "docker-compose.yml; nothing was changed",
            exit_code=2,
        )


# -- pipeline files -------------------------------------------------------------------------


def _flat(value: object) -> bool:
    """Scalars, and containers of scalars, fit on one line."""
    if isinstance(value, dict):
        return all(not isinstance(v, dict | list) or not v for v in value.values())
    if isinstance(value, list):
        return all(not isinstance(v, dict | list) or not v for v in value)
    return True


def render_json(value: object, level: int = 0, prefix: int = 0) -> str:
    """The pipeline files' style: two-space indents, with a flat object or list on one line
    when it fits (``"connector": {"url": "...", "timeout": 1.0}``). Key order is kept."""
    inline = json.dumps(value, ensure_ascii=False)
    fits = 2 * level + prefix + len(inline) < JSON_WIDTH
    if not isinstance(value, dict | list) or (_flat(value) and fits):
        return inline
    pad = "  " * (level + 1)
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            shown = json.dumps(key, ensure_ascii=False) + ": "
            items.append(pad + shown + render_json(item, level + 1, len(shown)))
        opening, closing = "{", "}"
    else:
        items = [pad + render_json(item, level + 1) for item in value]
        opening, closing = "[", "]"
    return opening + "\n" + ",\n".join(items) + "\n" + "  " * level + closing


def read_pipeline(path: Path) -> JsonDict:
    """The pipeline document, refused unless the agent would run it as it is."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScaffoldError(f"cannot read {path}: {exc.strerror}", exit_code=2) from None
    except json.JSONDecodeError as exc:
        raise ScaffoldError(
            f"{path}: not valid JSON at line {exc.lineno}: {exc.msg}", exit_code=2
        ) from None
    try:
        build_pipeline(parse_pipeline_config(data, source=str(path)))
    except PipelineConfigError as exc:
        raise ScaffoldError(f"fix the pipeline first: {exc}", exit_code=2) from None
    result: JsonDict = data
    return result


def service_names(pipeline: JsonDict) -> set[str]:
    return {name for group in pipeline["services"].values() for name in group}


def used_ports(pipeline: JsonDict) -> dict[int, str]:
    """The ports of the pipeline's URLs, each with the entry that has it."""
    ports: dict[int, str] = {}
    for group, services in pipeline["services"].items():
        for name, entry in services.items():
            try:
                port = urlsplit(entry["connector"].get("url") or "").port
            except ValueError:  # the agent refuses such a URL: read_pipeline said so
                continue
            if port is not None:
                ports.setdefault(port, f"services.{group}.{name}")
    return ports


def held_here(port: int) -> bool:
    """Whether something on this machine listens on ``port`` now (another program, or a
    service of another checkout): ``chorus run`` could not start the skill there."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def free_skill_port(pipeline: JsonDict) -> int:
    """The first 82xx port no entry of the pipeline uses and nothing here holds now."""
    used = used_ports(pipeline)
    port = next((p for p in SKILL_PORTS if p not in used and not held_here(p)), None)
    if port is None:
        raise ScaffoldError(
            f"every port {SKILL_PORTS.start}-{SKILL_PORTS.stop - 1} is taken, in the "
            "pipeline or on this machine: choose one with --port, or --in-process"
        )
    return port


def check_port(port: int, pipeline: JsonDict, source: Path) -> None:
    """Refuse a port that is not one, or that another entry of the pipeline has."""
    if not 1 <= port <= 65535:
        raise ScaffoldError(f"bad --port {port}: a TCP port is 1-65535", exit_code=2)
    user = used_ports(pipeline).get(port)
    if user is not None:
        raise ScaffoldError(
            f"--port {port} is taken by {user} in {source}; choose another (nothing was changed)",
            exit_code=2,
        )


def skill_entry(pipeline: JsonDict, target: JsonDict) -> JsonDict:
    """A new entry at ``target`` (its ``url`` or ``module``) with the timeout and context
    window most of its sibling skills use."""
    skills = pipeline["services"].get("skills", {}).values()
    timeouts = Counter(e["connector"].get("timeout", DEFAULT_TIMEOUT) for e in skills)
    windows = Counter(e.get("context_window", DEFAULT_CONTEXT_WINDOW) for e in skills)
    timeout = timeouts.most_common(1)[0][0] if timeouts else DEFAULT_TIMEOUT
    window = windows.most_common(1)[0][0] if windows else DEFAULT_CONTEXT_WINDOW
    return {"connector": {**target, "timeout": timeout}, "context_window": window}


def with_skill(pipeline: JsonDict, name: str, entry: JsonDict) -> JsonDict:
    """A copy of the document with the skill last among the skills (the group is created in
    its place in the turn's order if there is none)."""
    result = copy.deepcopy(pipeline)
    services: JsonDict = result["services"]
    if "skills" not in services:
        services["skills"] = {}
        result["services"] = services = {
            group: services[group] for group in ROLES if group in services
        }
    services["skills"][name] = entry
    return result


def checked(pipeline: JsonDict, source: Path) -> str:
    """The document as text, once the agent has accepted it."""
    try:
        build_pipeline(parse_pipeline_config(pipeline, source=str(source)))
    except PipelineConfigError as exc:
        raise ScaffoldError(f"the new entry would break the pipeline: {exc}") from None
    return render_json(pipeline) + "\n"


# -- the plan and its writing ---------------------------------------------------------------


def render_template(file: str, name: str, local: str) -> str:
    """``local`` says how the local pipeline runs the skill (its README's line)."""
    template = files("agent.cli").joinpath("templates", "skill", f"{file}.tmpl")
    return (
        template.read_text(encoding="utf-8").replace("{{name}}", name).replace("{{local}}", local)
    )


@dataclass(frozen=True)
class Deployment:
    """The docker compose side: the compose file (as text) and its pipeline."""

    compose_file: Path
    compose_text: str
    pipeline_file: Path
    pipeline: JsonDict

    @property
    def names(self) -> set[str]:
        return service_names(self.pipeline) | set(compose_services(self.compose_text))

    def edits(self, name: str, entry: JsonDict, skills: set[str]) -> dict[Path, str]:
        # Its own container, as every service of the compose file, wherever it runs locally.
        compose_entry = copy.deepcopy(entry)
        local_target = {k: v for k, v in entry["connector"].items() if k not in ("url", "module")}
        compose_entry["connector"] = {
            "url": f"http://{name}:{SERVICE_PORT}/respond",
            **local_target,
        }
        compose_text = compose_with_skill(self.compose_text, name, skills)
        if name not in compose_services(compose_text):
            raise ScaffoldError(f"{COMPOSE_FILE}: the new service block did not land")
        return {
            self.pipeline_file: checked(
                with_skill(self.pipeline, name, compose_entry), self.pipeline_file
            ),
            self.compose_file: compose_text,
        }


def read_deployment(root: Path, local_pipeline: Path) -> Deployment | None:
    """Both compose files, or ``None`` when either is missing (neither is edited then)."""
    compose_file, pipeline_file = root / COMPOSE_FILE, root / COMPOSE_PIPELINE
    if not (compose_file.is_file() and pipeline_file.is_file()):
        return None
    if pipeline_file.resolve() == local_pipeline.resolve():
        raise ScaffoldError(
            f"--pipeline names {COMPOSE_PIPELINE}, which follows the local "
            "pipeline; name the local one",
            exit_code=2,
        )
    return Deployment(
        compose_file,
        compose_file.read_text(encoding="utf-8"),
        pipeline_file,
        read_pipeline(pipeline_file),
    )


def plan_skill(
    root: Path,
    name: str,
    pipeline_path: Path,
    *,
    port: int | None = None,
    in_process: bool = False,
) -> Plan:
    """Work out every file ``new skill`` writes, or say why it cannot. The skill gets a
    process of its own on ``port`` (by default the first free 82xx one), or with
    ``in_process`` runs in the agent's process."""
    check_name(name)
    if in_process and port is not None:
        raise ScaffoldError(
            "--port and --in-process do not go together: a skill in the agent's "
            "process has no port of its own",
            exit_code=2,
        )
    if not (root / "skills").is_dir():
        raise ScaffoldError(
            f"no skills/ folder in {root}: run this in the repository root", exit_code=2
        )
    local = read_pipeline(pipeline_path)
    deployment = read_deployment(root, pipeline_path)
    check_unused(name, root, service_names(local) | (deployment.names if deployment else set()))

    notes = []
    if in_process:
        module = f"skills.{name}.app"
        entry = skill_entry(local, {"module": module})
        shown = f"{module}, in the agent's process"
        local_line = f"by module (`{module}`), run in the agent's process by `make run`"
    else:
        if port is None:
            port = free_skill_port(local)
        else:
            check_port(port, local, pipeline_path)
            if held_here(port):
                notes.append(
                    f"Port {port} is in use on this machine now: `make run` cannot start "
                    "the skill\nwhile it is."
                )
        shown = f"http://127.0.0.1:{port}/respond"
        entry = skill_entry(local, {"url": shown})
        local_line = f"`{shown}`, started by `make run` as a process of its own"
    edits = {pipeline_path: checked(with_skill(local, name, entry), pipeline_path)}
    changes = {pipeline_path: f"services.skills.{name}: {shown}"}
    if deployment is not None:
        edits |= deployment.edits(name, entry, set(local["services"].get("skills", {})))
        changes[deployment.pipeline_file] = (
            f"services.skills.{name}: http://{name}:{SERVICE_PORT}/respond"
        )
        changes[deployment.compose_file] = f"service {name}, which the agent waits for"
    else:
        notes.append(
            f"{COMPOSE_FILE} or {COMPOSE_PIPELINE} not found: docker compose files left alone"
        )
    if local["services"].get("skill_selectors"):
        notes.append(
            "The pipeline has a skill selector: its rules apply only to the skills\n"
            "they name, so the new skill runs on every turn until a rule names it\n"
            "(docs/adding-a-skill.md, 7)."
        )
    new_files = {f: render_template(f, name, local_line) for f in TEMPLATE_FILES}
    pipelines = tuple(p for p in edits if deployment is None or p != deployment.compose_file)
    return Plan(name, root / "skills" / name, new_files, edits, changes, pipelines, notes)


def apply(plan: Plan) -> None:
    """Write the plan; on any failure, put every file back as it was."""
    originals = {path: path.read_text(encoding="utf-8") for path in plan.edits}
    try:
        plan.folder.mkdir()
    except OSError as exc:
        raise ScaffoldError(f"cannot create {plan.folder}: {exc.strerror}") from None
    try:
        for file, text in plan.new_files.items():
            (plan.folder / file).write_text(text, encoding="utf-8")
        for path, text in plan.edits.items():
            path.write_text(text, encoding="utf-8")
        for path in plan.pipelines:
            read_pipeline(path)
    except BaseException as exc:
        for path, text in originals.items():
            path.write_text(text, encoding="utf-8")
        shutil.rmtree(plan.folder)
        if isinstance(exc, OSError | ScaffoldError):
            raise ScaffoldError(f"{exc}; every change was undone") from exc
        raise


# -- the command ------------------------------------------------------------------------------


new_app = typer.Typer(
    help="Create a new service from a template.", no_args_is_help=True, rich_markup_mode=None
)


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _report(plan: Plan, root: Path) -> None:
    folder = _shown(plan.folder, root)
    typer.secho(f"Created {folder}/: {', '.join(plan.new_files)}", fg=typer.colors.GREEN)
    typer.echo(f"Registered skill {plan.name!r}:")
    width = max(len(_shown(path, root)) for path in plan.changes)
    for path, change in plan.changes.items():
        typer.echo(f"  {_shown(path, root):<{width}}  {change}")
    for note in plan.notes:
        typer.secho(note, fg=typer.colors.YELLOW)
    typer.echo(f"""
Next steps:
  1. Edit {folder}/app.py: your code goes between the "your code here" marks.
  2. Restart `make run` (Ctrl-C, then `make run`): it starts the new skill with the others.
  3. Talk to it: `.venv/bin/chorus chat` (another terminal), and mention "{plan.name}".
  4. Test it: `.venv/bin/pytest {folder}`.
See docs/adding-a-skill.md.""")


@new_app.command("skill")
def skill_command(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="The skill's name: 1-30 lowercase letters and digits, starting with a letter.",
        ),
    ],
    pipeline: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="The local pipeline file to register the skill in (by default "
            "CHORUS_PIPELINE, else pipeline.json).",
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            help="The port `make run` starts the skill on (by default the first 82xx port "
            "the pipeline does not use and nothing here holds).",
        ),
    ] = None,
    in_process: Annotated[
        bool,
        typer.Option(
            "--in-process",
            help="Run the skill in the agent's process, as the reference services, "
            "instead of a process of its own.",
        ),
    ] = False,
) -> None:
    """Create a skill and register it wherever it runs.

    Writes skills/NAME/ (a working skill, its test and its README) and registers the skill
    in the local pipeline, deploy/pipeline.compose.json and docker-compose.yml. Locally it
    gets a process of its own (its bugs cannot hold the agent) unless --in-process.
    """
    root = Path.cwd()
    try:
        local = pipeline or load_settings().pipeline
        plan = plan_skill(root, name, local, port=port, in_process=in_process)
        apply(plan)
    except SettingsError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except ScaffoldError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(exc.exit_code) from None
    except ComposeTextError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    _report(plan, root)
