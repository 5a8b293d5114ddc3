"""``chorus replay``: the command line around :mod:`.turns`, :mod:`.run` and :mod:`.report`.

It reads the store (``--db``, else ``CHORUS_DB_URL``) with no means of writing it, runs the
candidate pipeline's real services over HTTP as the agent does, and writes the summary to
standard output, the per-turn comparison to ``--out`` as it goes, and the HTML page to
``--html`` at the end. The progress goes to standard error. Ctrl-C stops the turns in
flight and still writes the report of those done (exit status 130).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent.backup.files import aware
from agent.cli.backup import DEFAULT_DB, err
from agent.cli.replay.compare import Summary, TurnDiff, summarise
from agent.cli.replay.config_diff import config_diff
from agent.cli.replay.labels import (
    LabelError,
    Labels,
    check_known,
    count_labels,
    label_turn,
    read_labels,
)
from agent.cli.replay.report import Context, html_report
from agent.cli.replay.run import replay
from agent.cli.replay.several import Run, beyond_noise, html_page, text_table
from agent.cli.replay.turns import (
    TurnFilter,
    UnknownSelection,
    answered_turns,
    select_turns,
    stored_turns,
)
from agent.kinds import load_any_pipeline, read_document
from agent.settings import Settings, SettingsError, load_settings
from agent.store import StoreUnavailable
from agent.store.reader import open_reader
from agent.turn.base import LoadedPipeline
from agent.turn.config import PipelineConfigError

#: The exit status after Ctrl-C, as a shell reports a command stopped by SIGINT.
INTERRUPTED = 130


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


class _Progress:
    """The progress on standard error: a bar on a terminal; elsewhere (a log, a pipe) a
    line ``replayed N/TOTAL turns`` at each percent, which a script can follow."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self._step = max(total // 100, 1)
        self._bar: Progress | None = None
        if err.is_terminal:
            self._bar = Progress(
                TextColumn("replaying turns"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            )
            self._task = self._bar.add_task("replay", total=total)
            self._bar.start()

    def advance(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.advance(self._task)
        elif self.done % self._step == 0 or self.done == self.total:
            print(f"replayed {self.done}/{self.total} turns", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()


@dataclass
class _Outcome:
    """What the replays did: each pipeline's comparisons, in the order they ran."""

    diffs: list[list[TurnDiff]] = field(default_factory=list)
    selected: int = 0
    #: messages a person answered, left out
    with_person: int = 0
    interrupted: bool = False


async def _until_interrupted(work: asyncio.Task[None]) -> bool:
    """Wait for ``work``; on SIGINT cancel it instead. Whether it was interrupted."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        stopping.cancel()
    if work.done():
        work.result()  # its error, if it failed
        return False
    work.cancel()
    with suppress(asyncio.CancelledError):
        await work
    return True


async def _replay(
    db_url: str,
    pipelines: list[tuple[str | None, LoadedPipeline]],
    chosen: TurnFilter,
    settings: Settings,
    concurrency: int,
    out: IO[str] | None,
    labels: Labels | None = None,
) -> _Outcome:
    """Each of ``pipelines`` (named when there are several) over the same turns, chosen
    once, one pipeline after the other, each turn labelled from ``labels`` (or as
    stored); Ctrl-C stops them all. A label naming a turn the store does not hold stops
    the replay before it starts."""
    outcome = _Outcome()
    opened = await open_reader(db_url)
    reader = opened.reader
    try:
        if labels is not None and (labels.by_utterance or labels.by_turn):
            check_known(labels, [turn async for turn in answered_turns(reader)])
        selection = await select_turns(reader, chosen)  # the turns are fixed from here on
        outcome.selected = selection.total
        outcome.with_person = selection.with_person
        progress = _Progress(outcome.selected * len(pipelines))
        try:
            for name, pipeline in pipelines:
                diffs: list[TurnDiff] = []
                outcome.diffs.append(diffs)

                def done(
                    diff: TurnDiff, diffs: list[TurnDiff] = diffs, name: str | None = name
                ) -> None:
                    diff.pipeline = name
                    label_turn(diff, labels)
                    diffs.append(diff)
                    if out is not None:
                        line = diff.model_dump_json(exclude=None if name else {"pipeline"})
                        out.write(line + "\n")
                        out.flush()
                    progress.advance()

                window = max(pipeline.history_window, 1)
                work = asyncio.create_task(
                    replay(
                        pipeline,
                        stored_turns(reader, selection, window),
                        done,
                        concurrency=concurrency,
                        channel_type=settings.channel_type,
                        limits=settings.limits,
                    )
                )
                outcome.interrupted = await _until_interrupted(work)
                if outcome.interrupted:
                    break
        finally:
            progress.stop()
    finally:
        await opened.close()
    return outcome


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _print_summary(summary: Summary) -> None:
    before, after = summary.stored, summary.candidate
    labelled = summary.labels
    lines = [
        f"turns replayed     {summary.turns}"
        + (f" of {summary.selected} (interrupted)" if summary.interrupted else ""),
        f"skill changed      {summary.skill_changed_share:.1%} ({summary.skill_changed})",
        f"response changed   {summary.response_changed_share:.1%} ({summary.response_changed})",
        f"{'':<19}{'stored':>12}{'candidate':>12}",
        f"{'fallbacks':<19}{before.fallbacks:>12}{after.fallbacks:>12}",
        f"{'turns with errors':<19}{before.turns_with_errors:>12}{after.turns_with_errors:>12}",
        f"{'latency p50':<19}{_ms(before.latency_p50):>12}{_ms(after.latency_p50):>12}",
        f"{'latency p95':<19}{_ms(before.latency_p95):>12}{_ms(after.latency_p95):>12}",
    ]
    if summary.with_person:
        lines.insert(
            1,
            f"with a person      {summary.with_person} messages an operator answered "
            "(handed off: not replayed)",
        )
    if labelled is not None:
        before_fit = f"{labelled.stored_fit} of {labelled.labelled}"
        after_fit = f"{labelled.candidate_fit} of {labelled.labelled}"
        lines += [
            f"{'fit their label':<19}{before_fit:>12}{after_fit:>12}",
            f"changed turns that now fit their label {labelled.now_fit}, "
            f"no longer fit it {labelled.no_longer_fit}",
        ]
    typer.echo("\n".join(lines))


#: Where ``make run`` serves the agent: the report's links to its inspector by default.
DEFAULT_AGENT_URL = "http://127.0.0.1:4242"


def _context(baseline: Path | None, settings: Settings, candidate: Path, agent_url: str) -> Context:
    """What the report says of the candidate's file against the baseline's (the agent's
    own pipeline file unless one is named; none, when that file is not there)."""
    if baseline is None:
        if not settings.pipeline.is_file():
            return Context(agent_url=agent_url.rstrip("/"))
        baseline = settings.pipeline
    try:
        changes = config_diff(read_document(baseline), read_document(candidate))
    except PipelineConfigError as exc:
        err.print(f"[yellow]warning:[/yellow] --baseline: {exc}", highlight=False)
        return Context(agent_url=agent_url.rstrip("/"))
    return Context(str(baseline), changes, agent_url.rstrip("/"))


def _names(files: list[Path]) -> list[str]:
    """Each run's name: its file's, or its path where two files have the same name."""
    plain = [file.name for file in files]
    return [file.name if plain.count(file.name) == 1 else str(file) for file in files]


def replay_command(
    pipeline: Annotated[
        list[Path],
        typer.Option(
            "--pipeline",
            "--candidate",
            help="The candidate pipeline file, Chorus's or dp-agent's pipeline_conf.json; "
            "repeatable, to compare several side by side.",
            exists=True,
            dir_okay=False,
        ),
    ],
    user: Annotated[
        list[str] | None,
        typer.Option(
            metavar="USER_ID", help="Replay this user's turns (the API's user_id); repeatable."
        ),
    ] = None,
    dialog: Annotated[
        list[str] | None,
        typer.Option(metavar="DIALOG_ID", help="Replay this dialog's turns; repeatable."),
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            metavar="DATE", help="Only turns sent at or after this date (UTC unless it says)."
        ),
    ] = None,
    until: Annotated[
        datetime | None,
        typer.Option(metavar="DATE", help="Only turns sent before this date (UTC unless it says)."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="Replay the first this many chosen turns."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, max=256, metavar="N", help="Turns replayed at once.")
    ] = 4,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write each turn's comparison to this file, as JSON Lines.",
            dir_okay=False,
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write the HTML report to this file.", dir_okay=False),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="The pipeline file the report compares the candidate's file with "
            "(CHORUS_PIPELINE, else pipeline.json, when there is one).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    noise: Annotated[
        bool,
        typer.Option(
            "--noise",
            help="Replay the baseline pipeline too, against itself, beside the candidates: "
            "what it changes is the noise of the turns (an LLM's sampling, moved content).",
        ),
    ] = False,
    agent_url: Annotated[
        str,
        typer.Option(
            "--agent-url",
            metavar="URL",
            help="The agent whose inspector the report's dialogs link to.",
        ),
    ] = DEFAULT_AGENT_URL,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as one JSON object.")
    ] = False,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            metavar="FILE",
            help="The skills that may answer each turn, as JSON Lines or CSV (.csv): "
            "count the changed turns that now fit their label and those that no longer do.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    db: Annotated[
        str,
        typer.Option(
            "--db",
            envvar="CHORUS_DB_URL",
            metavar="URL",
            help="The store to read: sqlite:///path/file.db or mongodb://host/db "
            "(CHORUS_DB_URL when not given). It is never written.",
        ),
    ] = DEFAULT_DB,
) -> None:
    """Run a candidate pipeline over stored turns and compare it with what was answered.

    Each chosen turn is rebuilt as it started (the utterances before it, the user's and
    the bot's attributes as the turn stored them) and run through the candidate's real
    services; its chosen skill, response, confidence, errors and latency are compared
    with the stored ones. The store is only read, never written. Choose the turns with
    --user, --dialog, --since, --until and --limit (every stored turn by default). The
    summary goes to standard output, the progress to standard error; Ctrl-C stops and
    writes the report of the turns done so far. Several --candidate files, and --noise
    (the baseline replayed against itself), run over the same turns and are compared
    side by side. With --labels (or labels stored on the turns), each run counts the
    changed turns that now fit their label and those that no longer do.
    """
    since, until = aware(since), aware(until)
    if since is not None and until is not None and since >= until:
        raise _fail("--since must be before --until", 2)
    try:
        settings = load_settings()
    except SettingsError as exc:
        raise _fail(str(exc), 2) from None
    files = list(pipeline)
    if noise:
        noise_file = baseline if baseline is not None else settings.pipeline
        if not noise_file.is_file():
            raise _fail(f"--noise replays the baseline pipeline, and {noise_file} is not a "
                        "file: name one with --baseline", 2)  # fmt: skip
        files.insert(0, noise_file)
    loaded = []
    for file in files:
        try:
            loaded.append(load_any_pipeline(file, turn_timeout=settings.dream_turn_timeout))
        except PipelineConfigError as exc:
            raise _fail(f"--pipeline: {exc}", 2) from None
    try:
        labelled = read_labels(labels) if labels is not None else None
    except LabelError as exc:
        raise _fail(str(exc), 2) from None
    names = _names(files)
    several = len(files) > 1
    chosen = TurnFilter(tuple(user or ()), tuple(dialog or ()), since, until, limit)
    target = None if out is None else out.open("w", encoding="utf-8", newline="\n")
    runs = [(name if several else None, one) for name, one in zip(names, loaded, strict=True)]
    try:
        outcome = asyncio.run(_replay(db, runs, chosen, settings, concurrency, target, labelled))
    except LabelError as exc:
        raise _fail(str(exc), 2) from None
    except ValueError as exc:
        raise _fail(f"--db: {exc}", 2) from None
    except UnknownSelection as exc:
        raise _fail(str(exc), 2) from None
    except StoreUnavailable as exc:
        raise _fail(f"the store cannot be read: {exc}") from None
    except KeyboardInterrupt:  # while the turns were still being chosen
        err.print("interrupted before any turn was replayed")
        raise typer.Exit(INTERRUPTED) from None
    finally:
        if target is not None:
            target.close()
    done = outcome.diffs + [[] for _ in files[len(outcome.diffs) :]]
    stopped = len(outcome.diffs) - 1 if outcome.interrupted else len(files)  # the run stopped
    summaries = [
        summarise(
            diffs,
            pipeline=name,
            selected=outcome.selected,
            interrupted=index >= stopped,
            with_person=outcome.with_person,
        )
        for index, (name, diffs) in enumerate(zip(names, done, strict=True))
    ]
    for summary, diffs in zip(summaries, done, strict=True):
        summary.labels = count_labels(diffs)
    if noise:
        summaries[0].noise = True
        for summary, diffs in zip(summaries[1:], done[1:], strict=True):
            summary.changed_beyond_noise = beyond_noise(diffs, done[0])
    if html is not None:
        contexts = [_context(baseline, settings, file, agent_url) for file in files]
        if several:
            page = html_page([Run(*run) for run in zip(summaries, done, contexts, strict=True)])
        else:
            page = html_report(summaries[0], done[0], contexts[0])
        html.write_text(page, encoding="utf-8")
    if as_json:
        typer.echo(
            summaries[0].model_dump_json()
            if not several
            else json.dumps({"runs": [s.model_dump(mode="json") for s in summaries]})
        )
    elif several:
        typer.echo(text_table(summaries))
    else:
        _print_summary(summaries[0])
    if outcome.interrupted:
        summary = summaries[stopped]
        err.print(f"interrupted: {summary.turns} of {summary.selected} turns replayed")
        raise typer.Exit(INTERRUPTED)
