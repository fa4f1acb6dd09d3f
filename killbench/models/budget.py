"""The token budget: one ceiling per target, the same for every generator.

Comparing generators is only fair if each gets the same number of tokens to spend, so
the ceiling is enforced by the model client, not left to generators' good manners.
Before a call the client *reserves* at most what remains as the call's output cap;
after it, the call is *settled* with the usage the API reported. Input tokens are only
known after a call, so the input of the last call may carry the total past the limit:
that excess is kept and reported as ``overshoot``, never hidden. Once nothing remains
the next call is refused with ``BudgetExhausted`` (no request is sent), and the budget
records when and why it stopped.

Reservations make concurrent callers safe: two threads cannot both be granted the same
remaining tokens as output. A caller that finds everything reserved by calls still in
flight waits for them to settle instead of being refused for tokens that may come back.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone

from ..errors import KillbenchError


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class BudgetExhausted(KillbenchError):
    """The token ceiling is spent; the generator must stop asking.

    Not a ``ModelError``: running out is the normal end of a generator's work on a
    target, and ``except ModelError`` must not swallow it.
    """

    def __init__(self, message: str, *, limit: int, spent: int):
        super().__init__(message)
        self.limit = limit
        self.spent = spent


class Budget:
    """A ceiling on input + output tokens, shared by every call made for one target."""

    def __init__(self, limit: int):
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise ValueError(f"a budget limit is a positive number of tokens, not {limit!r}")
        self.limit = limit
        self._spent_in = 0
        self._spent_out = 0
        self._reserved = 0
        self._calls = 0
        self._calls_without_usage = 0
        self._refused = 0
        self._stopped_at: str | None = None
        self._stop_reason: str | None = None
        self._cond = threading.Condition()
        self._closed: str | None = None

    # --- read-only views -------------------------------------------------------

    @property
    def spent_in(self) -> int:
        with self._cond:
            return self._spent_in

    @property
    def spent_out(self) -> int:
        with self._cond:
            return self._spent_out

    @property
    def spent(self) -> int:
        with self._cond:
            return self._spent_in + self._spent_out

    @property
    def remaining(self) -> int:
        """Tokens left after settled calls; negative when the last input overshot."""
        with self._cond:
            return self.limit - self._spent_in - self._spent_out

    @property
    def overshoot(self) -> int:
        with self._cond:
            return max(0, self._spent_in + self._spent_out - self.limit)

    @property
    def exhausted(self) -> bool:
        with self._cond:
            return self._stop_reason is not None or self._spent_in + self._spent_out >= self.limit

    @property
    def stopped_at(self) -> str | None:
        """When a call was first refused (UTC, ISO 8601); None while the budget lasts."""
        with self._cond:
            return self._stopped_at

    @property
    def stop_reason(self) -> str | None:
        with self._cond:
            return self._stop_reason

    def as_dict(self) -> dict:
        """For run summaries and transcripts."""
        with self._cond:
            spent = self._spent_in + self._spent_out
            return {
                "limit": self.limit,
                "spent_in": self._spent_in,
                "spent_out": self._spent_out,
                "spent": spent,
                "remaining": self.limit - spent,
                "overshoot": max(0, spent - self.limit),
                "calls": self._calls,
                "calls_without_usage": self._calls_without_usage,
                "refused_calls": self._refused,
                "exhausted": self._stop_reason is not None or spent >= self.limit,
                "stopped_at": self._stopped_at,
                "stop_reason": self._stop_reason,
            }

    # --- the protocol the model client follows ---------------------------------

    def reserve(self, requested: int, *, attempt_id: str | None = None) -> int:
        """Grant an output cap of at most ``requested`` tokens, or refuse the call."""
        if requested <= 0:
            raise ValueError(f"max_tokens must be positive, not {requested}")
        with self._cond:
            while True:
                if self._closed is not None:
                    self._refused += 1
                    raise BudgetExhausted(f"{self._closed}; no request sent", limit=self.limit,
                                          spent=self._spent_in + self._spent_out)
                left = self.limit - self._spent_in - self._spent_out
                if left <= 0:
                    self._refuse(left, attempt_id)
                free = left - self._reserved
                if free > 0:
                    granted = min(requested, free)
                    self._reserved += granted
                    return granted
                self._cond.wait()  # everything left is reserved by calls in flight

    def settle(self, granted: int, input_tokens: int | None, output_tokens: int | None) -> None:
        """Charge a finished call; with no usage reported, charge the whole output cap.

        A response without usage numbers cannot be counted exactly, and estimating
        tokens would make the ceiling depend on a tokenizer guess; charging the cap is
        the upper bound for output (the unknown input is charged as 0 and the
        transcript says so).
        """
        with self._cond:
            self._reserved -= granted
            self._calls += 1
            if input_tokens is None or output_tokens is None:
                self._calls_without_usage += 1
                self._spent_out += granted
            else:
                self._spent_in += input_tokens
                self._spent_out += output_tokens
            self._cond.notify_all()

    def close(self, reason: str) -> None:
        """Refuse every later call (the target's wall time or another budget is spent)."""
        with self._cond:
            self._closed = reason
            self._cond.notify_all()

    def release(self, granted: int) -> None:
        """Return a reservation whose call failed: a failed call reports no usage."""
        with self._cond:
            self._reserved -= granted
            self._cond.notify_all()

    def _refuse(self, left: int, attempt_id: str | None) -> None:
        spent = self._spent_in + self._spent_out
        self._refused += 1
        if self._stop_reason is None:
            self._stopped_at = utc_now()
            self._stop_reason = (
                f"token budget spent: {spent} of {self.limit} tokens "
                f"({self._spent_in} in, {self._spent_out} out) after {self._calls} calls; "
                f"a call{f' for attempt {attempt_id}' if attempt_id else ''} was refused")
        raise BudgetExhausted(
            f"budget exhausted: {spent} of {self.limit} tokens spent "
            f"(overshoot {max(0, -left)}); no request sent",
            limit=self.limit, spent=spent)
