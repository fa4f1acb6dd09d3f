# Mutant (more_itertools/more.py:4361, nth_permutation): `if q == 0: break` -> `continue`.
# The mutant keeps calling divmod(q, d) after q has reached 0. We pass an int subclass
# as index (a valid int) whose __divmod__ counts calls and keeps the subclass type.
# Input: nth_permutation('abc', 3, CountingInt(0)); n=3, r=3, c=6, d in range(1, 4).
#   clean : d=1: divmod(0,1)=(0,0), result[2]=0, q==0 -> break.  divmod calls = 1.
#   mutant: d=1,2,3 all run: divmod calls = 3.
#   Both return ('a', 'b', 'c') (result == [0, 0, 0]).
from more_itertools import nth_permutation

calls = []


class CountingInt(int):
    def __divmod__(self, other):
        calls.append(other)
        q, r = divmod(int(self), other)
        return CountingInt(q), CountingInt(r)


def test_nth_permutation_stops_dividing_once_quotient_is_zero():
    calls.clear()
    assert nth_permutation('abc', 3, CountingInt(0)) == ('a', 'b', 'c')
    assert calls == [1]
