# Mutant (slugify/_legacy.py:97, smart_truncate): `break` -> `continue` in the
# `elif next_len == max_length:` branch. The mutant keeps comparing later words
# against max_length. max_length is an int subclass (a valid int) that counts ==.
# Because CountingInt is a subclass of int and overrides __eq__, `next_len == max_length`
# (next_len a plain int) calls CountingInt.__eq__ first (reflected operand rule).
# Input: smart_truncate('ab cd ef', max_length=CountingInt(5), word_boundary=True)
#   'ab': next_len=2 < 5 -> truncated='ab '   (no == evaluated)
#   'cd': next_len=5, not < 5, 5 == ML (eq call #1) -> truncated='ab cd'
#   clean : break.                       -> eq calls == [5]
#   mutant: continue; 'ef': next_len=7, 7 < 5 False, 7 == ML (eq call #2) False,
#           save_order False.            -> eq calls == [5, 7]
#   Both return 'ab cd'.
from slugify import smart_truncate

eq_calls = []


class CountingInt(int):
    def __eq__(self, other):
        eq_calls.append(other)
        return int(self) == other

    __hash__ = int.__hash__


def test_smart_truncate_stops_at_exact_fit():
    eq_calls.clear()
    assert smart_truncate('ab cd ef', max_length=CountingInt(5), word_boundary=True) == 'ab cd'
    assert eq_calls == [5]
