"""ParlAI scores and dataset formats, against values worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.parlai.formats import DatasetError, read_episodes, write_episodes
from agent.parlai.scores import TurnScores, normalize_answer, rank_label_candidates


def test_normalize_answer_as_parlai() -> None:
    assert normalize_answer("The  Cat's hat!") == "cat s hat"


def test_turn_scores_by_hand() -> None:
    # "red big ball" vs "the big red ball": 3 common tokens of 3 and 3 (article dropped)
    scores = TurnScores.score("red big ball", ["x", "y", "big red ball"], ["big red ball"])
    assert scores.exact_match == 0.0
    assert scores.f1 == pytest.approx(1.0)
    assert (scores.hits_at_1, scores.hits_at_5) == (0.0, 1.0)
    assert scores.mrr == pytest.approx(1 / 3)
    partial = TurnScores.score("a red ball", ["a red ball"], ["red car"])
    # tokens [red, ball] vs [red, car]: precision 1/2, recall 1/2
    assert partial.f1 == pytest.approx(0.5)
    assert partial.mrr == 0.0


def test_label_candidates_follow_the_pipeline_ranking() -> None:
    assert rank_label_candidates(["a", "b", "c", "d"], ["c", "x", "a"]) == ["c", "a", "b", "d"]


def test_text_format_round_trip(tmp_path: Path) -> None:
    source = tmp_path / "babi.txt"
    source.write_text(
        "id:babi\ttext:Mary went to the hall.\\nWhere is Mary?\tlabels:hall"
        "\tlabel_candidates:hall|garden|a__PIPE__b\tepisode_done:False\n"
        "id:babi\ttext:Where is John?\tlabels:garden\treward:1\tepisode_done:True\n"
        "\n"
        "text:Alone\tlabels:yes\n"
    )
    episodes = read_episodes(source)
    assert [len(e) for e in episodes] == [2, 1]
    first = episodes[0][0]
    assert first["text"] == "Mary went to the hall.\nWhere is Mary?"
    assert first["label_candidates"] == ["hall", "garden", "a|b"]
    assert episodes[0][1]["reward"] == 1.0 and episodes[0][1]["episode_done"] is True
    for name in ("copy.txt", "copy.jsonl"):
        write_episodes(episodes, tmp_path / name)
        assert read_episodes(tmp_path / name) == episodes


def test_a_bad_line_names_file_and_line(tmp_path: Path) -> None:
    source = tmp_path / "bad.txt"
    source.write_text("text:fine\tepisode_done:True\nno field prefix here\n")
    with pytest.raises(DatasetError, match=r"bad\.txt:2: field 'no field prefix here'"):
        read_episodes(source)
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"labels": ["x"]}\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1: an example needs a 'text' field"):
        read_episodes(jsonl)
