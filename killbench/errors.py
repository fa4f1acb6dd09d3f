"""One exception hierarchy, and the exit codes the CLI maps it to.

A ``UserError`` is a mistake the user can fix (a bad pin, a missing key, a wrong
hash): its message says what to do. A ``HarnessError`` means the instrument itself
could not produce a trustworthy answer; it is never turned into a verdict.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Documented in docs/exit-codes.md."""

    OK = 0
    CHECK_FAILED = 1  # doctor or verify found a check that does not hold
    USER_ERROR = 2  # bad input: the message says what to change
    TARGET_ERROR = 3  # the target could not be prepared or its suite fails on clean code
    HARNESS_ERROR = 4  # the instrument could not give a trustworthy answer
    GENERATOR_ERROR = 5  # the generator or its model failed: the run is incomplete (resumable)
    INTERRUPTED = 130


class KillbenchError(Exception):
    """Base of every error killbench raises on purpose."""

    exit_code = ExitCode.HARNESS_ERROR


class UserError(KillbenchError):
    """Bad input; the message names what to change."""

    exit_code = ExitCode.USER_ERROR


class TargetError(KillbenchError):
    """A target could not be downloaded, verified, built, or its suite does not pass."""

    exit_code = ExitCode.TARGET_ERROR

    def __init__(self, target: str, message: str):
        super().__init__(f"target {target}: {message}")
        self.target = target


class GeneratorError(KillbenchError):
    """A generator raised, yielded something that is not a test, or its model failed."""

    exit_code = ExitCode.GENERATOR_ERROR


class InvariantError(KillbenchError):
    """A count or set that must hold by construction does not: a bug in killbench or a
    forged record. Raised, never asserted, so it holds under ``python -O`` too."""

    exit_code = ExitCode.HARNESS_ERROR


class HarnessError(KillbenchError):
    """The harness could not run something the way it must (isolation, reports)."""

    exit_code = ExitCode.HARNESS_ERROR
