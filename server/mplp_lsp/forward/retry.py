"""What to do with a remote's answer, and how long to wait before trying again.

The table (docs/forwarding.md has it with the defaults):

* 2xx: delivered.
* connect errors, timeouts, resets, 408, 429, 500, 502, 503, 504, and 409 (the
  Idempotency-Key draft's "the original request is still being processed"): retry the same
  batch after a backoff. Nothing is ever discarded because it is old.
* 400, 413, 422 with more than one envelope in the batch: split it in halves and send each
  (one poison envelope, or one that is too big, must not hold the others back).
* 400, 401, 403, 404, 413, 422 for a single envelope, and 401/403/404 for any batch: the
  envelopes go to the dead-letter table, counted; the queue behind them moves on.
* anything else (other 3xx, since redirects are not followed, other 4xx/5xx): retry with
  backoff, with the status as the last error. Those are configuration or server problems,
  not the envelope's fault, so the envelopes stay queued.

Backoff is exponential with full jitter: attempt *n* (0-based) waits a uniform random time
in ``[0, min(max_delay, initial_delay * 2**n)]``. A ``Retry-After`` (seconds or HTTP-date)
raises the wait to at least what the server asked, clamped to ``max_retry_after``. Delays
are durations on the monotonic clock, so wall-clock jumps neither shorten nor stretch them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import Enum

__all__ = ["Action", "RetryPolicy", "classify", "parse_retry_after"]


class Action(Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    SPLIT = "split"
    DEAD = "dead"


_RETRY = frozenset({408, 409, 429, 500, 502, 503, 504})
_SPLITTABLE = frozenset({400, 413, 422})
_DEAD = frozenset({400, 401, 403, 404, 413, 422})


def classify(status: int, batch_size: int) -> Action:
    """The action for an HTTP status answered to a batch of ``batch_size`` envelopes."""
    if 200 <= status < 300:
        return Action.DELIVERED
    if status in _RETRY:
        return Action.RETRY
    if status in _SPLITTABLE and batch_size > 1:
        return Action.SPLIT
    if status in _DEAD:
        return Action.DEAD
    return Action.RETRY


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delay-seconds or HTTP-date); None if unusable.

    A date in the past means "now" (0). Garbage is ignored rather than trusted.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = (moment - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, delta)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff settings; the defaults are those documented in docs/forwarding.md."""

    initial_delay: float = 1.0
    max_delay: float = 300.0
    max_retry_after: float = 3600.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_delay <= self.max_delay:
            raise ValueError("need 0 < initial_delay <= max_delay")
        if self.max_retry_after < 0:
            raise ValueError("max_retry_after must be >= 0")

    def ceiling(self, attempt: int) -> float:
        """The upper bound of the jittered wait before retry ``attempt`` (0-based)."""
        # min() before the power would overflow for a queue retried for weeks.
        exponent = min(attempt, 62)
        return min(self.max_delay, self.initial_delay * (2.0**exponent))

    def delay(
        self,
        attempt: int,
        retry_after: float | None = None,
        *,
        rand: Callable[[], float] = random.random,
    ) -> float:
        """Seconds before retry ``attempt``: full jitter, at least the clamped Retry-After."""
        wait = rand() * self.ceiling(attempt)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait
