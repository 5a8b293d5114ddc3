"""``bench.llm_turns``' figures for the LLM's first token: what Chorus adds, split where
the LLM's request arrives, and less what the LLM's own server adds for a direct client."""

from __future__ import annotations

from typing import Any

from bench.llm_turns import CHEAP, SCRIPT, cheap_text, figures


def llm_turn(sent: float, received: float, piece: float, token: float) -> dict[str, Any]:
    """An LLM turn as :func:`bench.llm_turns.turn` records it, with its LLM request."""
    return {
        "text": SCRIPT[0],
        "sent": sent,
        "answered": token + 3.0,
        "tokens": [token],
        "skill": "llm",
        "llm_requests": [{"received": received, "pieces": [piece]}],
    }


def cheap_turn(sent: float, answered: float) -> dict[str, Any]:
    return {
        "text": SCRIPT[0],
        "sent": sent,
        "answered": answered,
        "tokens": [],
        "skill": "faq",
        "llm_requests": [],
    }


def test_the_first_token_is_split_at_the_llm_request_and_the_llm_servers_part_taken_out() -> None:
    # 20 ms from the message to the LLM's request, its own 300 ms, 2 ms back to the client
    on = [llm_turn(10.0, 10.020, 10.320, 10.322), cheap_turn(20.0, 20.010)]
    off = [cheap_turn(30.0, 30.012), cheap_turn(40.0, 40.011)]
    result = figures(on, off, 1, overhead=[0.003, 0.004, 0.005])

    assert result["llm_first_token_less_llm_own"]["p50_ms"] == 22.0
    assert result["llm_request_after_message"]["p50_ms"] == 20.0
    assert result["first_token_after_llm_piece"]["p50_ms"] == 2.0
    assert result["llm_server_overhead_direct"]["p50_ms"] == 4.0
    # what a client of the LLM itself would have seen 4 ms of: Chorus adds 18 ms
    assert result["llm_first_token_behind_direct_client"]["p50_ms"] == 18.0
    assert result["cheap_turns_llm_on"]["n"] == 1


def test_the_spread_is_reported_around_the_median() -> None:
    on = [
        llm_turn(float(n), n + 0.010 + n / 1000, n + 0.310 + n / 1000, n + 0.311 + n / 1000)
        for n in range(1, 9)
    ]
    result = figures(on, [cheap_turn(0.0, 0.01)] * len(on), 1, overhead=[])

    spread = result["llm_first_token_less_llm_own"]
    assert spread["p25_ms"] < spread["p50_ms"] < spread["p75_ms"] <= spread["p95_ms"]
    assert spread["n"] == 8
    # no direct probe: nothing is taken out
    assert result["llm_first_token_behind_direct_client"]["p50_ms"] == spread["p50_ms"]


def test_fresh_cheap_turns_never_repeat_a_text_and_plain_ones_cycle_the_three() -> None:
    """``--agent-cost --fresh`` measures turns no service has kept an answer for."""
    fresh = [cheap_text(number, fresh=True) for number in range(300)]
    assert len(set(fresh)) == 300
    assert fresh[:3] == ["hi 0", "thanks 1", "my name is Ann 2"]
    assert [cheap_text(number, fresh=False) for number in range(6)] == CHEAP * 2
