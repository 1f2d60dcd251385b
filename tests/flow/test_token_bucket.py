from __future__ import annotations

import pytest
from flask_sqs_jobs.engine.flow import RateLimit
from flask_sqs_jobs.engine.flow import take_token


def test_a_new_bucket_allows_one_burst_then_refuses() -> None:
    limit = RateLimit("stripe", 3, per=1)
    state = None
    taken = []
    for _ in range(4):
        result = take_token(limit, state, now=100.0)
        state = result.state
        taken.append(result.taken)
    assert taken == [True, True, True, False]


def test_refused_take_says_when_a_token_comes_back() -> None:
    limit = RateLimit("stripe", 2, per=1)
    state = take_token(limit, None, 0.0).state
    state = take_token(limit, state, 0.0).state
    refused = take_token(limit, state, 0.0)
    assert not refused.taken
    assert refused.retry_after == pytest.approx(0.5)
    assert take_token(limit, refused.state, 0.5).taken


def test_tokens_never_exceed_the_limit_after_a_long_idle() -> None:
    limit = RateLimit("stripe", 2, per=1)
    state = take_token(limit, None, 0.0).state
    results = [take_token(limit, state, 1000.0)]
    results.append(take_token(limit, results[-1].state, 1000.0))
    results.append(take_token(limit, results[-1].state, 1000.0))
    assert [r.taken for r in results] == [True, True, False]


def test_a_clock_going_backwards_refills_nothing() -> None:
    limit = RateLimit("stripe", 1, per=1)
    state = take_token(limit, None, 50.0).state
    assert not take_token(limit, state, 10.0).taken
