# Mutant (boltons/tableutils.py:508, Table._add_horizontal_html_lines):
#   `if max_depth > 1: new_depth = max_depth - 1`  ->  `if max_depth >= 1: ...`
# With max_depth == 1 the mutant evaluates `max_depth - 1` (the clean code never
# subtracts when there is no nesting level left to descend into).
# Test input: max_depth is an int subclass (a valid int) modelling a "positive depth"
# whose subtraction refuses to go below 1.
#   clean : 507 `max_depth > 1` False -> new_depth = max_depth; 508 False; rows use esc();
#           returns the HTML string.
#   mutant: 508 `max_depth >= 1` True -> max_depth - 1 -> PositiveDepth.__sub__ raises
#           ValueError, so to_html raises.
from boltons.tableutils import Table


class PositiveDepth(int):
    def __sub__(self, other):
        res = int(self) - int(other)
        if res < 1:
            raise ValueError("depth must stay >= 1")
        return PositiveDepth(res)


def test_to_html_depth_one_does_not_descend():
    t = Table([[1, 2], [3, 4]], headers=[])
    html = t.to_html(orientation='horizontal', max_depth=PositiveDepth(1))
    assert '<td>1</td><td>2</td>' in html
    assert '<td>3</td><td>4</td>' in html
