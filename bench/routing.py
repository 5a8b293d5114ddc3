"""Does the right tier answer? The shipped pipeline over a labelled set of conversations,
with the LLM on and off: how often a cheap skill answers a turn it fits, how often one
answers a turn it does not fit (a *wrong cheap answer*), how often the LLM is asked, how
often the fallback answers, and the trade-off between quality and the LLM's share as the
LLM's ``run_below`` moves.

A set is JSON Lines, one conversation a line::

    {"id": "dev-017", "turns": [{"user": "Hiya!", "fits": ["greeting"], "topic": "greeting"}]}

``fits`` names the cheap skills that may answer the turn (``greeting``, ``faq``,
``smalltalk``, ``knowledge``, or an operator's own), or is exactly ``["llm"]``: only the
LLM answers it well. A turn without ``fits`` is sent and not scored. The LLM fits every
turn (it can greet too); the fallback fits none.

Each conversation is sent as a fresh user's, turn by turn, through ``POST /`` of the stack
a user runs (``chorus run`` with the checkout's pipeline.json, its services in the agent's
process, on SQLite): once with ``LLM_BASE_URL`` pointed at :mod:`bench.fast_llm`, once
without it. Which skill answered and whether the LLM was asked are read back from the
stored turns (``GET /api/dialogs/{id}``: the bot utterance's ``active_skill``, the human
utterance's ``trace`` and ``hypotheses``), as the inspector shows them.

The curve: a tier-1 skill runs when no tier-0 hypothesis reached its ``run_below``, so the
LLM-off run's hypotheses tell, for any ``run_below``, which turns would have gone to the
LLM and what would have answered the others. The point at the shipped ``run_below`` is
measured as well (the LLM-on run), and the report prints both.

    .venv/bin/python -m bench.routing                    # dev, then holdout (never tuned on)
    .venv/bin/python -m bench.routing --set holdout      # the set never tuned on alone
    .venv/bin/python -m bench.routing --set dev train    # several sets, then pooled
    .venv/bin/python -m bench.routing --set training     # every set fitted on, pooled too
    .venv/bin/python -m bench.routing --set heldout      # every set nobody tuned on, pooled
    .venv/bin/python -m bench.routing --set my.jsonl     # any set, e.g. from --store
    .venv/bin/python -m bench.routing --store sqlite:///chorus.db --export mine.jsonl

The named sets are ``TRAINING_SETS`` (dev, train, train2 ... train17) and
``HELD_OUT_SETS`` (holdout, typed, fresh, fresh2 ... fresh11); bench/data/routing/README.md
says who wrote each and how. Several sets are reported one by one and then pooled: every
turn of them all in one report (``routing-training``, ``routing-heldout``, or
``routing-pooled`` for another choice), the figures docs/performance.md gives.

``--store DB_URL`` turns the labelled and rated turns of a store into a set
(:mod:`bench.routing_store`) and, with ``--export``, writes it instead of running it.
Figures go to ``bench/results/routing-NAME.json`` (every turn with its hypotheses, for
:mod:`bench.calibrate`) and ``bench/results/routing-NAME.png`` (the curve); a pooled
report's JSON holds its figures and the sets it pooled, not their turns again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bench.llm_turns import process, stack, wait_up
from bench.ports import free_port
from bench.run import RESULTS

ROOT = Path(__file__).resolve().parents[1]
SETS = ROOT / "bench" / "data" / "routing"
#: The skill that fits every turn, and the label of turns only it fits.
LLM = "llm"
#: The skill that answers when nothing else can, and the agent's own fallback response
#: (no hypothesis survived): neither fits any turn.
FALLBACKS = frozenset({"fallback", "fallback_response"})
#: The ``run_below`` values the curve visits.
CURVE = (0.0, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 1.01)


class BadSet(ValueError):
    """A set file that is not the documented JSON Lines; the message names the line."""


class LabelledTurn(BaseModel):
    """One user turn and what may answer it."""

    model_config = ConfigDict(extra="allow")

    user: str = Field(min_length=1)
    #: absent: the turn is sent (the later turns need its state) and not scored
    fits: list[str] | None = Field(default=None, min_length=1)
    topic: str | None = None

    @field_validator("fits")
    @classmethod
    def _llm_alone(cls, fits: list[str] | None) -> list[str] | None:
        if fits is None:
            return None
        if LLM in fits and fits != [LLM]:
            raise ValueError('"llm" is a label alone: a turn a cheap skill fits needs no LLM')
        if any(name in FALLBACKS for name in fits):
            raise ValueError('the fallback fits no turn: label such a turn ["llm"]')
        return fits


class Conversation(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    turns: list[LabelledTurn] = Field(min_length=1)


def load_set(path: Path) -> list[Conversation]:
    """Every conversation of a set file, checked; a bad line stops the run naming it."""
    conversations: list[Conversation] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            conversations.append(Conversation.model_validate_json(line))
        except ValidationError as error:
            raise BadSet(f"{path}, line {number}: {error}") from None
    if not conversations:
        raise BadSet(f"{path}: no conversation")
    return conversations


#: The sets to fit on, in the order they were written: ``bench.calibrate``'s default sets
#: and the only ones ``bench.knowledge --conversations`` reads.
TRAINING_SETS: tuple[str, ...] = (
    "dev",
    "train",
    "train2",
    "train3",
    "train4",
    "train5",
    "train6",
    "train7",
    "train8",
    "train9",
    "train10",
    "train11",
    "train12",
    "train13",
    "train14",
    "train15",
    "train16",
    "train17",
)
#: The sets nobody tuned on, in the order they were written: each was run as a check and
#: only its figures read, never its turns (bench/data/routing/README.md).
HELD_OUT_SETS: tuple[str, ...] = (
    "holdout",
    "typed",
    "fresh",
    *(f"fresh{number}" for number in range(2, 12)),
)
#: The sets called by name: the training sets may be fitted on, the held-out ones only
#: reported.
NAMED_SETS = frozenset({*TRAINING_SETS, *HELD_OUT_SETS})
#: Names that stand for several sets: each is run and reported on its own, then all their
#: turns pooled into one report, as docs/performance.md gives the figures.
GROUPS: dict[str, tuple[str, ...]] = {"training": TRAINING_SETS, "heldout": HELD_OUT_SETS}
#: What a bare ``python -m bench.routing`` runs: the first set the shipped files were
#: fitted on, and the set nothing was tuned on, each reported on its own.
DEFAULT_SETS = ("dev", "holdout")


def set_path(name: str) -> Path:
    """A named set (``NAMED_SETS``) is the shipped file; anything else is a file's path."""
    return SETS / f"{name}.jsonl" if name in NAMED_SETS else Path(name)


@dataclass
class Hypothesis:
    skill: str
    confidence: float
    text: str
    #: what the skill measured before calibrating, and which of its ways of answering
    #: this is (:mod:`shared.calibration`); absent for skills that do not say
    raw: float | None = None
    answer_type: str | None = None


@dataclass
class Observed:
    """One turn as the pipeline answered it."""

    conversation: str
    place: int
    text: str
    fits: list[str]
    skill: str
    answer: str
    llm_asked: bool
    #: the skill selectors let the LLM run (it still waits for its tier)
    llm_selected: bool = True
    hypotheses: list[Hypothesis] = field(default_factory=list)
    reason: str | None = None
    #: what the bot said before this turn (None on the first): the reading's context
    previous: str | None = None

    @property
    def llm_only(self) -> bool:
        return self.fits == [LLM]

    @property
    def fallback(self) -> bool:
        return self.skill in FALLBACKS

    @property
    def cheap(self) -> bool:
        """A cheap skill answered: neither the LLM nor a fallback."""
        return self.skill != LLM and not self.fallback

    @property
    def wrong_cheap(self) -> bool:
        return self.cheap and self.skill not in self.fits


def _hypotheses(utterance: dict[str, Any]) -> list[Hypothesis]:
    found = []
    for h in utterance.get("hypotheses") or []:
        routing = h.get("routing") if isinstance(h.get("routing"), dict) else {}
        found.append(
            Hypothesis(
                skill=str(h["skill_name"]),
                confidence=float(h["confidence"]),
                text=str(h["text"]),
                raw=routing.get("raw"),
                answer_type=routing.get("kind"),
            )
        )
    return found


def _llm_asked(utterance: dict[str, Any]) -> bool:
    """The trace has a call of the LLM skill that was made (not skipped by its tier)."""
    return any(
        call.get("service") == LLM and call.get("outcome") != "skipped"
        for call in utterance.get("trace") or []
    )


def _llm_selected(utterance: dict[str, Any]) -> bool:
    """Every skill selector let the LLM skill run: it chose every skill (none named), or
    the LLM, or does not decide about it."""
    for decision in utterance.get("skill_selection") or []:
        skills, decides = decision.get("skills") or [], decision.get("decides")
        if skills and LLM not in skills and (decides is None or LLM in decides):
            return False
    return True


def converse(client: httpx.Client, conversation: Conversation, tag: str) -> list[Observed]:
    """One conversation as a fresh user's, then its stored turns read back."""
    user = f"routing-{tag}-{conversation.id}-{uuid.uuid4().hex[:8]}"
    dialog_id = ""
    for turn in conversation.turns:
        reply = client.post("/", json={"user_id": user, "payload": turn.user})
        reply.raise_for_status()
        dialog_id = reply.json()["dialog_id"]
    stored = client.get(f"/api/dialogs/{dialog_id}", params={"view": "chorus"})
    stored.raise_for_status()
    utterances = stored.json()["utterances"]
    humans = [u for u in utterances if u["speaker"] == "human"]
    bots = [u for u in utterances if u["speaker"] == "bot"]
    observed = []
    for place, (turn, human, bot) in enumerate(
        zip(conversation.turns, humans, bots, strict=True), start=1
    ):
        if turn.fits is None:
            continue
        observed.append(
            Observed(
                conversation=conversation.id,
                place=place,
                text=turn.user,
                fits=turn.fits,
                skill=str(bot.get("active_skill")),
                answer=str(bot["text"]),
                llm_asked=_llm_asked(human),
                llm_selected=_llm_selected(human),
                hypotheses=_hypotheses(human),
                reason=(bot.get("attributes") or {}).get("selector_reason"),
                previous=str(bots[place - 2]["text"]) if place > 1 else None,
            )
        )
    return observed


def share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def with_llm(turns: Sequence[Observed]) -> dict[str, Any]:
    """The LLM-on figures."""
    n = len(turns)
    return {
        "turns": n,
        "fitting_cheap": share(sum(t.cheap and not t.wrong_cheap for t in turns), n),
        "wrong_cheap": share(sum(t.wrong_cheap for t in turns), n),
        "wrong_cheap_turns": sum(t.wrong_cheap for t in turns),
        "llm_asked": share(sum(t.llm_asked for t in turns), n),
        "llm_answered": share(sum(t.skill == LLM for t in turns), n),
        "fallback": share(sum(t.fallback for t in turns), n),
        "quality": share(sum(good(t) for t in turns), n),
    }


def without_llm(turns: Sequence[Observed]) -> dict[str, Any]:
    """The LLM-off figures: cheap-labelled turns should get a cheap skill that fits,
    LLM-only turns the fallback."""
    cheap = [t for t in turns if not t.llm_only]
    only = [t for t in turns if t.llm_only]
    return {
        "turns": len(turns),
        "fitting_cheap": share(sum(t.cheap and not t.wrong_cheap for t in turns), len(turns)),
        "wrong": share(sum(t.wrong_cheap for t in turns), len(turns)),
        "cheap_labelled_turns": len(cheap),
        "fallback_on_cheap_labelled": share(sum(t.fallback for t in cheap), len(cheap)),
        "llm_only_turns": len(only),
        "fallback_on_llm_only": share(sum(t.fallback for t in only), len(only)),
        "cheap_pretended_on_llm_only": sum(t.cheap for t in only),
    }


def good(turn: Observed) -> bool:
    """The answer fits: the LLM's, or a cheap skill's the label names."""
    return turn.skill == LLM or (turn.cheap and turn.skill in turn.fits)


def curve(turns: Sequence[Observed], thresholds: Iterable[float] = CURVE) -> list[dict[str, Any]]:
    """Quality and the LLM's share for each ``run_below``, from the LLM-off run: the LLM
    runs when the skill selectors let it and no cheap hypothesis (the fallback's included:
    it is a tier-0 skill) reached ``run_below``, and answers then; otherwise the answer
    given without it stands."""
    points = []
    for threshold in thresholds:
        asked = [
            t.llm_selected
            and not any(h.confidence >= threshold for h in t.hypotheses if h.skill != LLM)
            for t in turns
        ]
        quality = sum(True if a else good(t) for t, a in zip(turns, asked, strict=True))
        wrong = sum(t.wrong_cheap for t, a in zip(turns, asked, strict=True) if not a)
        points.append(
            {
                "run_below": threshold,
                "llm_share": share(sum(asked), len(turns)),
                "quality": share(quality, len(turns)),
                "wrong_cheap": share(wrong, len(turns)),
            }
        )
    return points


def shipped_run_below(repo: Path) -> float:
    config = json.loads((repo / "pipeline.json").read_text())
    value = config["services"]["skills"].get(LLM, {}).get("run_below")
    return float(value) if value is not None else 0.0


@contextmanager
def fake_llm() -> Iterator[str]:
    """:mod:`bench.fast_llm` on a free port; its base URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "uvicorn", "bench.fast_llm:app", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with process([*command, "--log-level", "warning"], ROOT, env) as server:
        wait_up(f"{base}/health", server)
        yield base


def measure(
    repo: Path, conversations: Sequence[Conversation], name: str
) -> tuple[list[Observed], list[Observed], int]:
    """Every conversation through a stack with the LLM and one without; and how many
    requests the LLM itself counted (to check the turn records' account)."""
    with fake_llm() as llm, stack(repo, f"{llm}/v1", False) as on:
        after_warm_up = httpx.get(f"{llm}/log").json()["requests"]
        on_turns = [t for c in conversations for t in converse(on, c, f"{name}-on")]
        requests = httpx.get(f"{llm}/log").json()["requests"] - after_warm_up
    with stack(repo, None, False) as off:
        off_turns = [t for c in conversations for t in converse(off, c, f"{name}-off")]
    return on_turns, off_turns, requests


def report(
    name: str,
    on: Sequence[Observed],
    off: Sequence[Observed],
    requests: int,
    run_below: float,
) -> dict[str, Any]:
    return {
        "set": name,
        "conversations": len({t.conversation for t in on}),
        "run_below": run_below,
        "llm_on": with_llm(on),
        "llm_requests_counted_by_the_llm": requests,
        "llm_off": without_llm(off),
        "curve": curve(off),
    }


def table(result: dict[str, Any]) -> str:
    """The figures as a user reads them."""
    on, off = result["llm_on"], result["llm_off"]

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f} %"

    lines = [
        f"set {result['set']}: {result['conversations']} conversations, {on['turns']} turns "
        f"({off['cheap_labelled_turns']} for a cheap skill, {off['llm_only_turns']} only "
        f"for the LLM); the LLM's run_below {result['run_below']:g}",
        "LLM on:",
        f"  answered by a fitting cheap skill   {pct(on['fitting_cheap'])}",
        f"  wrong cheap answers                 {pct(on['wrong_cheap'])} "
        f"({on['wrong_cheap_turns']} of {on['turns']})",
        f"  LLM asked                           {pct(on['llm_asked'])} "
        f"({result['llm_requests_counted_by_the_llm']} requests counted by the LLM)",
        f"  answered by the LLM                 {pct(on['llm_answered'])}",
        f"  fallback                            {pct(on['fallback'])}",
        f"  quality (LLM or a fitting skill)    {pct(on['quality'])}",
        "LLM off:",
        f"  answered by a fitting cheap skill   {pct(off['fitting_cheap'])}",
        f"  fallbacks on cheap-labelled turns   {pct(off['fallback_on_cheap_labelled'])}",
        f"  fallbacks on LLM-only turns         {pct(off['fallback_on_llm_only'])}",
        f"  cheap skill pretended, LLM-only     {off['cheap_pretended_on_llm_only']}",
        f"  wrong answers                       {pct(off['wrong'])}",
        "curve (from the LLM-off run's hypotheses):",
        "  run_below  LLM share  quality  wrong cheap",
    ]
    for point in result["curve"]:
        lines.append(
            f"  {point['run_below']:>9g}  {pct(point['llm_share']):>9}  "
            f"{pct(point['quality']):>7}  {pct(point['wrong_cheap']):>11}"
        )
    return "\n".join(lines)


def draw(result: dict[str, Any], path: Path) -> None:
    """Quality against the LLM's share, one point per ``run_below``, the measured point
    marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    xs = [100 * p["llm_share"] for p in result["curve"]]
    ys = [100 * p["quality"] for p in result["curve"]]
    axes.plot(xs, ys, marker="o", label="as run_below moves")
    for point, x, y in zip(result["curve"], xs, ys, strict=True):
        axes.annotate(
            f"{point['run_below']:g}",
            (x, y),
            fontsize=7,
            xytext=(3, -9),
            textcoords="offset points",
        )
    on = result["llm_on"]
    axes.plot(
        [100 * on["llm_asked"]],
        [100 * on["quality"]],
        "r*",
        markersize=12,
        label=f"measured, run_below {result['run_below']:g}",
    )
    axes.set_xlabel("turns sent to the LLM (%)")
    axes.set_ylabel("turns answered fittingly (%)")
    axes.set_title(f"Routing on the {result['set']} set")
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def save(
    result: dict[str, Any], on: Sequence[Observed], off: Sequence[Observed], folder: Path
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"routing-{Path(result['set']).stem}"
    turns = {"llm_on": [asdict(t) for t in on], "llm_off": [asdict(t) for t in off]}
    stem.with_suffix(".json").write_text(json.dumps({**result, "turns": turns}, indent=1) + "\n")
    draw(result, stem.with_suffix(".png"))
    return stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--set",
        nargs="+",
        help=f"one or more of {', '.join(TRAINING_SETS)} (all of them: training), "
        f"{', '.join(HELD_OUT_SETS)} (all of them: heldout), or a set file's path; by "
        f"default {' and '.join(DEFAULT_SETS)}: a set the files were fitted on, and one "
        "nothing was tuned on, each on its own",
    )
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--store", help="a store's URL: its labelled and rated turns as the set")
    parser.add_argument("--export", type=Path, help="with --store: write the set, do not run it")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the folder of the results")
    args = parser.parse_args(argv)
    if args.store:
        from bench.routing_store import export

        target = args.export or args.out / "routing-store.jsonl"
        count = export(args.store, target)
        print(f"{count} labelled turns of {args.store} written to {target}")
        if args.export:
            return 0
        args.set = [str(target)]
    # the default's two sets are of two kinds, fitted on and never tuned on: not pooled
    pools = pooled_names(args.set or DEFAULT_SETS, pool=args.set is not None)
    # every set read first: a bad file is named before minutes are spent on the others
    chosen: dict[str, list[Conversation]] = {}
    for asked in dict.fromkeys(name for names in pools.values() for name in names):
        path = set_path(asked)
        if not path.exists():
            print(
                f"bench.routing: {asked} is no set's name and no file: name a group "
                f"({' or '.join(GROUPS)}), a set ({', '.join((*TRAINING_SETS, *HELD_OUT_SETS))})"
                ", or a set file's path",
                file=sys.stderr,
            )
            return 2
        try:
            chosen[set_name(asked)] = load_set(path)
        except (BadSet, OSError) as error:
            print(f"bench.routing: {error}", file=sys.stderr)
            return 2
    repo = args.repo.resolve()
    run_below = shipped_run_below(repo)
    results: dict[str, tuple[dict[str, Any], list[Observed], list[Observed]]] = {}
    for place, (name, conversations) in enumerate(chosen.items(), start=1):
        if len(chosen) > 1:
            print(f"bench.routing: set {place} of {len(chosen)}, {name}", file=sys.stderr)
        on, off, requests = measure(repo, conversations, name)
        result = report(name, on, off, requests, run_below)
        results[name] = (result, on, off)
        stem = save(result, on, off, args.out)
        print(table(result))
        print(f"every turn: {stem.with_suffix('.json')}; the curve: {stem.with_suffix('.png')}")
    for pool, names in pools.items():
        if pool is None:
            continue
        stems = [set_name(name) for name in names]
        result = pooled(pool, [results[stem] for stem in stems], run_below)
        stem = save_pooled(result, args.out)
        print(table(result))
        print(
            f"{len(stems)} sets pooled: {stem.with_suffix('.json')}; the curve: "
            f"{stem.with_suffix('.png')}"
        )
    return 0


def set_name(asked: str) -> str:
    """The name a set is reported under: its own, or its file's stem."""
    return asked if asked in NAMED_SETS else set_path(asked).stem


def pooled_names(asked: Sequence[str], pool: bool = True) -> dict[str | None, list[str]]:
    """The sets to run, by the pooled report each belongs to: a group's name
    (:data:`GROUPS`) stands for its sets, pooled under that name; other sets, when more
    than one was asked, are pooled as ``pooled``. Under None, the sets no pool takes
    (one set alone, or ``pool`` false)."""
    pools: dict[str | None, list[str]] = {}
    rest = [name for name in asked if name not in GROUPS]
    for name in asked:
        if name in GROUPS:
            pools[name] = list(GROUPS[name])
    if rest:
        pools["pooled" if pool and len(rest) > 1 else None] = rest
    return pools


def pooled(
    name: str,
    runs: Sequence[tuple[dict[str, Any], list[Observed], list[Observed]]],
    run_below: float,
) -> dict[str, Any]:
    """One report over every turn of several sets' runs: each turn weighs the same,
    whichever set it came from."""
    on = [turn for _, turns, _ in runs for turn in turns]
    off = [turn for _, _, turns in runs for turn in turns]
    requests = sum(each["llm_requests_counted_by_the_llm"] for each, _, _ in runs)
    result = report(name, on, off, requests, run_below)
    result["conversations"] = sum(each["conversations"] for each, _, _ in runs)
    result["sets"] = [each["set"] for each, _, _ in runs]
    return result


def save_pooled(result: dict[str, Any], folder: Path) -> Path:
    """A pooled report's figures and the sets it pooled; their turns are in each set's file."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"routing-{result['set']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    draw(result, stem.with_suffix(".png"))
    return stem


if __name__ == "__main__":
    sys.exit(main())
