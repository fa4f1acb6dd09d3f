# Mutant (tenacity/_utils.py:75, find_ordinal): `4 <= pos_num <= 20` -> `4 <= pos_num < 20`.
# For pos_num == 20 the mutant falls through to `find_ordinal(pos_num % 10)` (same "th").
# Reached through the public before_log strategy with a RetryCallState whose
# attempt_number is an int subclass (a valid int) counting `%`.
#   clean : 20 % 100 (mod #1) = 20; not 11..13, not 0..3; 4 <= 20 <= 20 -> "th". mods=[100]
#   mutant: 20 % 100 (mod #1); 20 < 20 False -> 20 % 10 (mod #2) = 0 (plain int)
#           -> find_ordinal(0) -> "th".                                     mods=[100, 10]
#   Both log "... this is the 20th time calling it."
import logging

from tenacity import RetryCallState, Retrying, before_log

mods = []


class CountingInt(int):
    def __mod__(self, other):
        mods.append(other)
        return int(self) % other


class ListLogger:
    def __init__(self):
        self.msgs = []

    def log(self, level, msg, *args):
        self.msgs.append(msg)


def test_before_log_twentieth_attempt():
    def fn():
        return 1

    state = RetryCallState(Retrying(), fn, (), {})
    state.attempt_number = CountingInt(20)
    logger = ListLogger()
    mods.clear()
    before_log(logger, logging.INFO)(state)
    assert logger.msgs[0].endswith("this is the 20th time calling it.")
    assert mods == [100]
