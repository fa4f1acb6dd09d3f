# Mutant (slugify/slugify.py:153, _modern_truncate): `break` -> `continue` in
# `if remaining <= 0:`. The mutant keeps walking later tokens and builds a delimiter
# `separator * k` for each. The separator is a str subclass counting __mul__.
# Input: slugify('ab cd ef', max_length=2, separator=Sep('-'), algorithm='modern')
#   pipeline text = 'ab-cd-ef' (len 8 > 2), tokens ['ab', 'cd', 'ef'].
#   'ab': sep*0 (mul #1), remaining=2, append 'ab', length=2, len 2 > 2 False.
#   'cd': sep*1 (mul #2), remaining=-1 <= 0.
#   clean : break.                                                   muls=[0, 1]
#   mutant: continue; 'ef': sep*2 (mul #3), remaining=-2 -> continue. muls=[0, 1, 2]
#   Both return 'ab'.
from slugify import slugify

muls = []


class Sep(str):
    def __mul__(self, n):
        muls.append(n)
        return str.__mul__(self, n)


def test_modern_hard_cut_stops_at_first_overflow():
    muls.clear()
    assert slugify('ab cd ef', max_length=2, separator=Sep('-'), algorithm='modern') == 'ab'
    assert muls == [0, 1]
