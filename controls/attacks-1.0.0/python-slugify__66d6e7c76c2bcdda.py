# Mutant (slugify/slugify.py:158, _modern_truncate): `len(word) > remaining` ->
# `len(word) >= remaining`. When a word fits exactly, the mutant stops; the clean code
# goes on to the next token and builds its delimiter `separator * k` before breaking.
# The separator is a str subclass (passes isinstance(separator, str)) counting __mul__.
# Input: slugify('ab cd', max_length=2, separator=Sep('-'), algorithm='modern')
#   pipeline text = 'ab-cd' (len 5 > 2), tokens ['ab', 'cd'], word_boundary False.
#   'ab': sep*0 (mul #1) -> '', remaining=2, append 'ab', length=2; len('ab') > 2 False
#   clean : 'cd': sep*1 (mul #2) -> '-', remaining=2-2-1=-1 <= 0 -> break. muls=[0, 1]
#   mutant: len('ab') >= 2 True -> break.                                  muls=[0]
#   Both return 'ab'.
from slugify import slugify

muls = []


class Sep(str):
    def __mul__(self, n):
        muls.append(n)
        return str.__mul__(self, n)


def test_modern_hard_cut_checks_next_token():
    muls.clear()
    assert slugify('ab cd', max_length=2, separator=Sep('-'), algorithm='modern') == 'ab'
    assert muls == [0, 1]
