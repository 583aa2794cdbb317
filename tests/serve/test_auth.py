"""The sign-in rate limit (``serve.auth.RateLimit``): its table of client addresses is bounded (an address whose
window has passed is forgotten, a check adds nothing, the table holds at most ``max_clients``) and bounding it
never weakens the limit: a flood of new addresses resets no one's count, and no address gets more failures in a
window than an unbounded table would let it have."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.serve.conftest import need_serve

need_serve()

from groundjudge.serve.auth import RateLimit


class Clock:
    """``time.monotonic`` for the limit, moved by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_addresses_whose_window_passed_are_forgotten_and_a_check_keeps_nothing(clock: Clock) -> None:
    # every address ever seen stayed in the table for good: a scan of bad tokens from many addresses grew it for
    # as long as the service ran
    limit = RateLimit(limit=3, window=60.0, clock=clock)
    for i in range(500):
        assert limit.blocked(f"10.0.{i // 250}.{i % 250}") == 0.0  # a check (every bearer request) adds nothing
    assert len(limit) == 0
    for i in range(500):
        limit.failed(f"10.1.{i // 250}.{i % 250}")
    assert len(limit) == 500
    clock.t += 30
    limit.failed("10.1.0.0")  # still in its window: kept, now the newest
    clock.t += 30.5  # the others' window has passed
    assert limit.blocked("10.9.9.9") == 0.0
    assert len(limit) == 1
    clock.t += 60
    limit.failed("10.2.0.1")
    assert len(limit) == 1


def test_a_full_table_resets_no_one_and_the_addresses_it_has_no_room_for_share_one_limit(clock: Clock) -> None:
    limit = RateLimit(limit=3, window=60.0, max_clients=4, clock=clock)
    for _ in range(3):
        limit.failed("victim-of-a-guesser")  # the address that guesses tokens, at its limit
    assert limit.blocked("victim-of-a-guesser") > 0
    for i in range(3):
        limit.failed(f"filler-{i}")
    # a flood of new addresses: the table never grows past its cap, and never lets go of a counted address
    for i in range(1000):
        if not limit.blocked(f"flood-{i}"):
            limit.failed(f"flood-{i}")
    assert len(limit) == 4
    assert limit.blocked("victim-of-a-guesser") > 0  # its limit is where it was
    # the flood's addresses share one bucket: 3 failures in all, then every new address waits
    assert limit.blocked("flood-new") > 0
    assert limit.blocked("filler-0") == 0.0  # an address with its own record keeps its own count
    clock.t += 61  # every window has passed: each address has its own record again
    assert limit.blocked("flood-new") == 0.0 and limit.blocked("victim-of-a-guesser") == 0.0
    limit.failed("flood-new")
    assert len(limit) == 1


steps = st.lists(
    st.tuples(st.integers(0, 7), st.sampled_from([0.0, 0.5, 7.0, 20.0, 61.0])),  # an address, then a pause
    min_size=1,
    max_size=80,
)


@settings(max_examples=200, deadline=None, database=None)
@given(steps=steps, max_clients=st.integers(1, 5))
def test_bounding_the_table_never_lets_an_address_fail_more_often(
    steps: list[tuple[int, float]], max_clients: int
) -> None:
    """Each address tries, as a guesser would, whenever it is not blocked and fails: in no window of 20 s does
    any address fail more than 3 times, whatever the cap, and wherever the unbounded table blocks it the bounded
    one does too."""
    clock = Clock()
    limit, unbounded = RateLimit(3, 20.0, max_clients, clock), RateLimit(3, 20.0, max_clients=10**9, clock=clock)
    failures: dict[int, list[float]] = {}
    # the limits read this clock alone: nothing process-wide is patched
    for who, pause in steps:
        clock.t += pause
        address = f"192.0.2.{who}"
        wait = limit.blocked(address)
        if unbounded.blocked(address):
            assert wait > 0, (address, clock.t)
        if wait:
            continue
        limit.failed(address)
        unbounded.failed(address)
        failures.setdefault(who, []).append(clock.t)
        recent = [t for t in failures[who] if t > clock.t - 20.0]
        assert len(recent) <= 3, (address, recent)
        assert len(limit) <= max_clients
