"""Our Dockerfiles read as a builder reads them, without a Docker engine: the instructions
they use (FROM, ARG, ENV, WORKDIR, COPY, USER, HEALTHCHECK, CMD), build arguments
substituted, and the files each COPY takes from the build context after ``.dockerignore``.
``stage`` copies those files to a folder standing for the image's ``/``.

It reads what deploy/agent.Dockerfile and deploy/service.Dockerfile need and fails on what
they do not use (a COPY --from, an ENV without ``=``), rather than guess."""

from __future__ import annotations

import functools
import glob
import json
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
DOCKERIGNORE = ROOT / ".dockerignore"

#: ``$NAME``, ``${NAME}`` and ``${NAME:-default}`` (the default may hold a ``${...}``).
_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::-((?:[^{}]|\{[^{}]*\})*))?\}|(\w+))")


def substitute(text: str, values: dict[str, str]) -> str:
    """The builder's variable replacement: unset or empty takes the ``:-`` default."""

    def one(match: re.Match[str]) -> str:
        value = values.get(match.group(1) or match.group(3), "")
        default = match.group(2)
        return substitute(default, values) if default is not None and not value else value

    return _VARIABLE.sub(one, text)


@dataclass
class Copy:
    sources: list[str]  # build-context paths, variables substituted
    dest: str  # absolute, in the image; ends with "/" for a folder
    line: int


@dataclass
class Dockerfile:
    path: Path
    base: str = ""
    user: str = ""
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    copies: list[Copy] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    healthcheck: str = ""

    def where(self, line: int) -> str:
        return f"{self.path.relative_to(ROOT)}:{line}"


def instructions(text: str) -> Iterator[tuple[int, str, str]]:
    """``(line, KEYWORD, arguments)``: continuations joined, comment lines dropped."""
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # comment lines are removed even inside a continued instruction
        if not buffer:
            start = number
        buffer.append(line.removesuffix("\\").strip())
        if not line.endswith("\\"):
            keyword, _, args = " ".join(buffer).partition(" ")
            buffer = []
            yield start, keyword.upper(), args.strip()
    assert not buffer, "the last instruction ends with a line continuation"


def parse_dockerfile(path: Path, build_args: dict[str, str] | None = None) -> Dockerfile:
    """The Dockerfile as built with these ``--build-arg`` values (only declared ARGs count)."""
    result = Dockerfile(path)
    variables: dict[str, str] = {}  # ARG and ENV values, as the builder substitutes them
    for line, keyword, args in instructions(path.read_text()):
        if keyword in ("FROM", "ARG", "ENV", "WORKDIR", "COPY", "USER"):
            args = substitute(args, variables)
        if keyword == "FROM":
            result.base = args.split()[0]
        elif keyword == "ARG":
            name, _, default = args.partition("=")
            variables[name] = (build_args or {}).get(name, default)
        elif keyword == "ENV":
            pairs = [word.split("=", 1) for word in shlex.split(args)]
            assert all(len(p) == 2 for p in pairs), f"{result.where(line)}: write ENV KEY=value"
            result.env |= dict(pairs)
            variables |= dict(pairs)
        elif keyword == "WORKDIR":
            result.workdir = str(PurePosixPath(result.workdir) / args)
        elif keyword == "USER":
            result.user = args
        elif keyword == "COPY":
            *sources, dest = shlex.split(args)
            assert not any(s.startswith("--") for s in sources), (
                f"{result.where(line)}: COPY flags are not read here"
            )
            absolute = str(PurePosixPath(result.workdir) / dest)
            result.copies.append(Copy(sources, absolute + "/" * dest.endswith("/"), line))
        elif keyword == "CMD":
            assert args.startswith("["), f"{result.where(line)}: use the exec form CMD [...]"
            result.cmd = json.loads(args)
        elif keyword == "HEALTHCHECK":
            result.healthcheck = args
    return result


# -- the build context ------------------------------------------------------------------------


@functools.cache
def dockerignore() -> tuple[tuple[re.Pattern[str], bool], ...]:
    """``.dockerignore`` as ``(regex, excluded)`` pairs, in order (the last match wins)."""
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines() if DOCKERIGNORE.exists() else []:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern = line.lstrip("!").strip().strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            else:
                regex += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
                i += 1
        rules.append((re.compile(regex), not line.startswith("!")))
    return tuple(rules)


def ignored(relative: str) -> bool:
    """Whether the build context leaves out this path (or a folder it is in)."""
    parts = PurePosixPath(relative).parts
    excluded = False
    for regex, exclude in dockerignore():
        if any(regex.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            excluded = exclude
    return excluded


def matches(source: str) -> list[str]:
    """What one COPY source names in the context (a glob may name several, or none)."""
    if glob.has_magic(source):
        return sorted(glob.glob(source, root_dir=ROOT))
    return [source.rstrip("/")] if (ROOT / source).exists() else []


def context_files(match: str) -> list[str]:
    """The files (relative paths) under one matched path the context sends."""
    if ignored(match):
        return []
    path = ROOT / match
    if not path.is_dir():
        return [match]
    return [
        str(p.relative_to(ROOT))
        for p in sorted(path.rglob("*"))
        if p.is_file() and not ignored(str(p.relative_to(ROOT)))
    ]


def copy_problems(dockerfile: Dockerfile) -> list[str]:
    """COPY sources that do not exist or send nothing, and COPYs that send no file at all."""
    problems = []
    for copy in dockerfile.copies:
        sent = 0
        for source in copy.sources:
            files = [f for m in matches(source) for f in context_files(m)]
            sent += len(files)
            if not glob.has_magic(source) and not files:
                problems.append(
                    f"{dockerfile.where(copy.line)}: COPY source {source!r} "
                    + (
                        "does not exist"
                        if not (ROOT / source).exists()
                        else "is empty or excluded by .dockerignore"
                    )
                )
        if sent == 0:
            problems.append(
                f"{dockerfile.where(copy.line)}: COPY {' '.join(copy.sources)} matches no file"
            )
    return problems


def stage(dockerfile: Dockerfile, into: Path) -> Path:
    """Copy what the COPY instructions put in the image to ``into`` (as the image's ``/``);
    return the staged WORKDIR. A folder's contents go into the destination; a file goes
    into it when the destination ends with ``/`` or several files are copied."""
    for copy in dockerfile.copies:
        many = len(copy.sources) > 1 or any(glob.has_magic(s) for s in copy.sources)
        target = into / copy.dest.lstrip("/")
        for match in [m for source in copy.sources for m in matches(source)]:
            for file in context_files(match):
                if (ROOT / match).is_dir():
                    destination = target / Path(file).relative_to(match)
                elif many or copy.dest.endswith("/"):
                    destination = target / Path(file).name
                else:
                    destination = target
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / file, destination)
    workdir = into / dockerfile.workdir.lstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir
