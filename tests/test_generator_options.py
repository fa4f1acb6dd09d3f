"""A generator's -o options are checked before anything runs: an option it does not take,
or a value of the wrong type, is a UserError naming the valid ones (never a traceback and
never silently ignored)."""

import pytest

from killbench.errors import UserError
from killbench.plugins import load_generator


class TakesDepth:
    name, version = "takes-depth", "1"

    def __init__(self, depth: int = 1):
        self.depth = int(depth)

    def generate(self, ctx):
        return iter(())


class _Instance:
    name, version = "instance", "1"

    def generate(self, ctx):
        return iter(())


INSTANCE = _Instance()


def test_amplify_options_are_converted():
    gen = load_generator("amplify", {"search_calls": "7", "search_seconds": "1.5"})
    assert (gen.search_calls, gen.search_seconds, gen.max_programs) == (7, 1.5, 12)


@pytest.mark.parametrize("options, words", [
    ({"nosuch": "1"}, ["no option nosuch", "search_calls"]),
    ({"search_calls": "abc"}, ["search_calls='abc'", "not an integer"]),
    ({"search_seconds": "0"}, ["search_seconds='0'", "more than 0"]),
])
def test_amplify_refuses_bad_options(options, words):
    with pytest.raises(UserError) as err:
        load_generator("amplify", options)
    for w in words:
        assert w in str(err.value)


def test_model_generators_refuse_unknown_options():
    with pytest.raises(UserError, match="no option nosuch"):
        load_generator("targeted-gated", {"nosuch": "1"})


def test_a_plugin_class_that_does_not_take_an_option():
    ref = f"{__name__}:TakesDepth"
    assert load_generator(ref, {"depth": "3"}).depth == 3
    with pytest.raises(UserError) as err:
        load_generator(ref, {"width": "3"})
    assert "width" in str(err.value) and "it takes: depth" in str(err.value)


def test_an_instance_takes_no_options():
    ref = f"{__name__}:INSTANCE"
    assert load_generator(ref).name == "instance"
    with pytest.raises(UserError, match="takes no options"):
        load_generator(ref, {"depth": "1"})
