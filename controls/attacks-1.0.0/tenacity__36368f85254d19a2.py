# Mutant (tenacity/asyncio/retry.py:115, retry_any.__call__): `break` -> `continue`
# in `if result:`. After a truthy result the mutant keeps looping; each extra iteration
# evaluates `result or ...` and `if result:`, i.e. calls bool(result) twice more.
# A user retry strategy (any callable is accepted) returns a truthy object that counts
# __bool__ calls.
# Input: retry_any(s1, s2)(state), s1 returns t, s2 returns False.
#   iter 1: `False or await s1(state)` -> result = t (no t.__bool__); `if result:` -> 1 call
#   clean : break; returns t, bool calls = 1.
#   mutant: continue; iter 2: `t or ...` -> call 2 (short-circuits, s2 not called);
#           `if result:` -> call 3; returns t, bool calls = 3.
import asyncio

from tenacity.asyncio import retry_any


class Truthy:
    def __init__(self):
        self.bool_calls = 0

    def __bool__(self):
        self.bool_calls += 1
        return True


def test_retry_any_stops_after_first_truthy_strategy():
    t = Truthy()
    second = []
    r = retry_any(lambda rs: t, lambda rs: second.append(rs) or False)
    res = asyncio.run(r(object()))
    assert res is t
    assert second == []
    assert t.bool_calls == 1
