"""The assertion-class rules of killbench.assertions, one example test per rule."""

import ast
import textwrap

import pytest

from killbench.assertions import ASSERTION_CLASSES, classify_file, classify_test

CASES = [
    # ---- value
    ("eq_literal", "def test_x():\n    assert f(2) == 3\n", "value"),
    ("literal_on_left", "def test_x():\n    assert 3 == f(2)\n", "value"),
    ("eq_list_literal", "def test_x():\n    assert a == [1, 2]\n", "value"),
    ("eq_negative_and_nested", "def test_x():\n    assert f() == {'a': (-1, None)}\n", "value"),
    ("is_true_pins_bool", "def test_x():\n    assert is_prime(7) is True\n", "value"),
    ("in_literal_set", "def test_x():\n    assert f() in {1, 2}\n", "value"),
    ("len_eq_literal", "def test_x():\n    assert len(f()) == 3\n", "value"),
    ("approx_literal", "def test_x():\n    assert f() == pytest.approx(0.3)\n", "value"),
    ("chained_with_eq", "def test_x():\n    assert 0 < f() == 4\n", "value"),
    ("and_takes_strongest", "def test_x():\n    assert f() is not None and f() == 2\n", "value"),
    ("or_of_values", "def test_x():\n    assert f() == 1 or f() == 2\n", "value"),
    (
        "local_bound_to_literal",
        "def test_x():\n    expected = [1, 2]\n    result = f()\n    assert result == expected\n",
        "value",
    ),
    (
        "local_chain_to_literal",
        "def test_x():\n    base = 2\n    expected = base * 3\n    assert f() == expected\n",
        "value",
    ),
    (
        "parametrized_literal",
        "@pytest.mark.parametrize('x, expected', [(1, 2), pytest.param(2, 4, id='two')])\n"
        "def test_x(x, expected):\n    assert double(x) == expected\n",
        "value",
    ),
    (
        "unittest_assert_equal",
        "def test_x(self):\n    self.assertEqual(f(), 'abc')\n",
        "value",
    ),
    (
        "several_asserts_strongest",
        "def test_x():\n    r = f()\n    assert r\n"
        "    assert isinstance(r, list)\n    assert r[0] == 'a'\n",
        "value",
    ),
    (
        "raises_then_message_value",
        "def test_x():\n    with pytest.raises(ValueError) as info:\n        f(-1)\n"
        "    assert str(info.value) == 'negative'\n",
        "value",
    ),
    (
        "assert_in_loop",
        "def test_x():\n    for i in range(3):\n        if i:\n            assert f(i) == 1\n",
        "value",
    ),
    (
        "mock_called_with_literals",
        "def test_x(m):\n    m.assert_called_once_with(1, key='a')\n",
        "value",
    ),
    (
        "numpy_testing_equal",
        "def test_x():\n    np.testing.assert_allclose(f(), [0.5, 1.5])\n",
        "value",
    ),
    # ---- exception
    (
        "pytest_raises_cm",
        "def test_x():\n    with pytest.raises(ValueError):\n        f(-1)\n",
        "exception",
    ),
    (
        "pytest_raises_match",
        "def test_x():\n    with pytest.raises(KeyError, match='k'):\n        f({})\n",
        "exception",
    ),
    (
        "pytest_raises_call_form",
        "def test_x():\n    pytest.raises(TypeError, f, None)\n",
        "exception",
    ),
    (
        "assert_raises_method",
        "def test_x(self):\n    self.assertRaises(KeyError, f, {})\n",
        "exception",
    ),
    (
        "try_except_else_fail",
        "def test_x():\n    try:\n        f(-1)\n    except ValueError:\n        pass\n"
        "    else:\n        pytest.fail('no raise')\n",
        "exception",
    ),
    (
        "try_fail_in_body",
        "def test_x():\n    try:\n        f(-1)\n        assert False\n"
        "    except (ValueError, TypeError):\n        pass\n",
        "exception",
    ),
    (
        "exception_beats_existence",
        "def test_x():\n    assert f(1) is not None\n"
        "    with pytest.raises(ValueError):\n        f(-1)\n",
        "exception",
    ),
    ("numpy_assert_raises", "def test_x():\n    assert_raises(IndexError, f, [])\n", "exception"),
    # ---- existence
    ("is_not_none", "def test_x():\n    assert f() is not None\n", "existence"),
    ("eq_none_is_existence", "def test_x():\n    assert f() == None\n", "existence"),
    ("truthiness", "def test_x():\n    assert f()\n", "existence"),
    ("not_truthiness", "def test_x():\n    assert not f()\n", "existence"),
    ("isinstance", "def test_x():\n    assert isinstance(f(), dict)\n", "existence"),
    ("len_positive", "def test_x():\n    assert len(f()) > 0\n", "existence"),
    ("not_equal_literal", "def test_x():\n    assert f() != 3\n", "existence"),
    ("literal_member_of_result", "def test_x():\n    assert 'key' in f()\n", "existence"),
    ("computed_oracle", "def test_x():\n    assert f(x) == f(x)\n", "existence"),
    (
        "local_from_call_not_literal",
        "def test_x():\n    expected = sorted(data)\n    assert f(data) == expected\n",
        "existence",
    ),
    (
        "local_literal_then_mutated",
        "def test_x():\n    expected = []\n    expected.append(g())\n    assert f() == expected\n",
        "existence",
    ),
    (
        "local_rebound_to_call",
        "def test_x():\n    expected = 1\n    expected = g()\n    assert f() == expected\n",
        "existence",
    ),
    (
        "parametrize_indirect_not_literal",
        "@pytest.mark.parametrize('expected', [1, 2], indirect=True)\n"
        "def test_x(expected):\n    assert f() == expected\n",
        "existence",
    ),
    (
        "parametrized_then_mutated",
        "@pytest.mark.parametrize('expected', [[1], [2]])\n"
        "def test_x(expected):\n    expected.append(g())\n    assert f() == expected\n",
        "existence",
    ),
    (
        "try_except_exception_else_fail",
        "def test_x():\n    try:\n        f(-1)\n    except Exception:\n        pass\n"
        "    else:\n        pytest.fail('no raise')\n",
        "existence",
    ),
    (
        "try_bare_except_else_fail",
        "def test_x():\n    try:\n        f(-1)\n    except:\n        pass\n"
        "    else:\n        raise AssertionError\n",
        "existence",
    ),
    ("is_none", "def test_x():\n    assert f() is None\n", "existence"),
    (
        "fixture_param_not_literal",
        "def test_x(expected):\n    assert f() == expected\n",
        "existence",
    ),
    (
        "raises_generic_exception",
        "def test_x():\n    with pytest.raises(Exception):\n        f(-1)\n",
        "existence",
    ),
    (
        "raises_tuple_with_base_exception",
        "def test_x():\n    with pytest.raises((ValueError, BaseException)):\n        f(-1)\n",
        "existence",
    ),
    ("unittest_assert_true", "def test_x(self):\n    self.assertTrue(f())\n", "existence"),
    ("unittest_equal_none", "def test_x(self):\n    self.assertEqual(f(), None)\n", "existence"),
    ("or_weakest", "def test_x():\n    assert f() == 1 or f()\n", "existence"),
    (
        # the handler swallows the failure, so this is no try pattern; assert False
        # still counts as a hand-written failure
        "try_fail_swallowed_by_assertion_error",
        "def test_x():\n    try:\n        f(-1)\n        assert False\n"
        "    except AssertionError:\n        pass\n",
        "existence",
    ),
    (
        "loop_variable_not_literal",
        "def test_x():\n    for i in range(3):\n        assert f(i) == i\n",
        "existence",
    ),
    ("guarded_fail", "def test_x():\n    if f() != 3:\n        pytest.fail('bad')\n", "existence"),
    ("numpy_assert_truthiness", "def test_x():\n    assert_(f() > 1)\n", "existence"),
    (
        "numpy_equal_computed",
        "def test_x():\n    assert_array_equal(f(a), g(a))\n",
        "existence",
    ),
    (
        "other_module_call_is_code_under_test",
        "def test_x():\n    assert subprocess.call(['true']) == 0\n",
        "value",
    ),
    (
        "match_capture_not_literal",
        "def test_x():\n    expected = 1\n    match f():\n        case [expected]:\n"
        "            pass\n    assert g() == expected\n",
        "existence",
    ),
    # ---- none
    ("no_assert", "def test_x():\n    f(1)\n", "none"),
    ("helper_call_not_counted", "def test_x():\n    check_equal(f(1), 2)\n", "none"),
    (
        "assert_in_nested_def_not_counted",
        "def test_x():\n    def check(v):\n        assert v == 2\n    f(1)\n",
        "none",
    ),
    ("assert_true_constant", "def test_x():\n    f()\n    assert True\n", "none"),
    ("literal_tautology", "def test_x():\n    f()\n    assert 1 == 1\n", "none"),
    (
        "try_except_without_fail",
        "def test_x():\n    try:\n        f(-1)\n    except ValueError:\n        pass\n",
        "none",
    ),
]


@pytest.mark.parametrize(
    "source, expected", [(src, cls) for _, src, cls in CASES], ids=[name for name, _, _ in CASES]
)
def test_classify_test_table(source, expected):
    assert classify_test(source) == expected


def test_table_covers_every_class():
    assert {cls for _, _, cls in CASES} == set(ASSERTION_CLASSES)
    assert len(CASES) >= 25


def test_classes_are_ordered_strongest_first():
    assert ASSERTION_CLASSES == ("value", "exception", "existence", "none")


def test_accepts_a_node_and_indented_source():
    node = ast.parse("def test_x():\n    assert f() == 1\n").body[0]
    assert classify_test(node) == "value"
    indented = "    def test_m(self):\n        self.assertIsNotNone(f())\n"
    assert classify_test(indented) == "existence"


def test_source_with_helper_picks_the_test():
    source = "def helper():\n    assert g() == 1\n\ndef test_x():\n    helper()\n"
    assert classify_test(source) == "none"


def test_source_without_a_single_test_is_rejected():
    with pytest.raises(ValueError, match="exactly one test function"):
        classify_test("def test_a():\n    pass\n\ndef test_b():\n    pass\n")


MODULE = textwrap.dedent(
    """
    import unittest
    import pytest

    EXPECTED = (1, 2)
    MUTATED = []
    MUTATED.append(3)

    def helper(v):
        assert v == 1

    def test_module_constant():
        assert f() == EXPECTED

    def test_mutated_module_name():
        assert f() == MUTATED

    def test_helper_only():
        helper(f())

    class TestThing:
        def test_raises(self):
            with pytest.raises(KeyError):
                f({})

        def not_a_test(self):
            assert f() == 1

        class TestInner:
            def test_inner(self):
                assert f()

    class Cases(unittest.TestCase):
        def test_equal(self):
            self.assertEqual(f(), 2)

    class Helper:
        def test_not_collected(self):
            assert f() == 1
    """
)


def test_classify_file_names_and_classes():
    assert classify_file(MODULE) == {
        "test_module_constant": "value",
        "test_mutated_module_name": "existence",
        "test_helper_only": "none",
        "TestThing::test_raises": "exception",
        "TestThing::TestInner::test_inner": "existence",
        "Cases::test_equal": "value",
    }


def test_local_binding_shadows_module_constant():
    source = "EXPECTED = 3\n\ndef test_x():\n    EXPECTED = g()\n    assert f() == EXPECTED\n"
    assert classify_file(source) == {"test_x": "existence"}


def test_syntax_error_names_file_and_line():
    source = "def test_ok():\n    assert f() == 1\n\ndef test_bad(:\n    pass\n"
    with pytest.raises(ValueError, match=r"tests/test_gen\.py:4"):
        classify_file(source, filename="tests/test_gen.py")


def test_syntax_error_in_single_test_source():
    with pytest.raises(ValueError, match=r"<test>:2"):
        classify_test("def test_x():\n    assert ==\n")


# Every assertion name the classifier knows, spelled out here from the libraries' own
# documentation (unittest.TestCase, numpy.testing, unittest.mock), not read from
# killbench.assertions: a name dropped or misspelt there changes a class here.
UNITTEST_EQUALITY = ["assertEqual", "assertEquals", "failUnlessEqual", "assertAlmostEqual",
                     "assertAlmostEquals", "failUnlessAlmostEqual", "assertListEqual",
                     "assertTupleEqual", "assertDictEqual", "assertSetEqual", "assertSequenceEqual",
                     "assertMultiLineEqual", "assertCountEqual", "assertItemsEqual"]
UNITTEST_EXISTENCE = ["assertTrue", "assertFalse", "assert_", "failUnless", "failIf", "assertIsNone",
                      "assertIsNotNone", "assertIsInstance", "assertNotIsInstance", "assertNotIn",
                      "assertNotEqual", "assertNotEquals", "failIfEqual", "assertNotAlmostEqual",
                      "assertNotAlmostEquals", "assertGreater", "assertGreaterEqual", "assertLess",
                      "assertLessEqual", "assertRegex", "assertRegexpMatches", "assertNotRegex",
                      "assertNotRegexpMatches", "assertLogs", "assertNoLogs",
                      "assertDictContainsSubset", "assertIsNot"]
UNITTEST_RAISES = ["assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "failUnlessRaises",
                   "assertWarns", "assertWarnsRegex"]
MOCK_EXISTENCE = ["assert_called", "assert_called_once", "assert_not_called", "assert_awaited",
                  "assert_awaited_once", "assert_not_awaited"]
MOCK_ARGUMENTS = ["assert_called_with", "assert_called_once_with", "assert_any_call",
                  "assert_has_calls", "assert_awaited_with", "assert_awaited_once_with",
                  "assert_any_await", "assert_has_awaits"]
NUMPY_EQUALITY = ["assert_equal", "assert_array_equal", "assert_almost_equal",
                  "assert_array_almost_equal", "assert_approx_equal", "assert_allclose",
                  "assert_array_almost_equal_nulp"]
NUMPY_EXISTENCE = ["assert_", "assert_array_less", "assert_string_equal"]
NUMPY_RAISES = ["assert_raises", "assert_raises_regex", "assert_warns"]
MATH_CONSTANTS = ["pi", "e", "tau", "inf", "nan"]
LITERAL_CONSTRUCTORS = ["frozenset", "set", "tuple", "list", "dict", "float", "int", "complex", "str",
                        "bytes", "bytearray", "Decimal", "decimal.Decimal", "Fraction",
                        "fractions.Fraction", "approx", "pytest.approx", "call", "mock.call",
                        "unittest.mock.call"]


def _known_and_misspelt(template, name, cls, misspelt="none"):
    """The test `template` with NAME as the known name gets `cls`; with it misspelt, `misspelt`."""
    assert classify_test(template.replace("NAME", name)) == cls
    assert classify_test(template.replace("NAME", name + "X")) == misspelt


@pytest.mark.parametrize("name,cls", [(n, "value") for n in UNITTEST_EQUALITY]
                         + [(n, "existence") for n in UNITTEST_EXISTENCE])
def test_each_unittest_comparison_method(name, cls):
    _known_and_misspelt("def test_x(self):\n    self.NAME(f(1), 2)\n", name, cls)


@pytest.mark.parametrize("name", UNITTEST_RAISES)
def test_each_unittest_raises_or_warns_method(name):
    _known_and_misspelt("def test_x(self):\n    self.NAME(KeyError, f, {})\n", name, "exception")


@pytest.mark.parametrize("name,cls", [(n, "existence") for n in MOCK_EXISTENCE]
                         + [(n, "value") for n in MOCK_ARGUMENTS])
def test_each_mock_assertion(name, cls):
    args = "" if cls == "existence" else "1, 2"
    _known_and_misspelt(f"def test_x():\n    m.NAME({args})\n", name, cls)


@pytest.mark.parametrize("name,cls", [(n, "value") for n in NUMPY_EQUALITY]
                         + [(n, "existence") for n in NUMPY_EXISTENCE]
                         + [(n, "exception") for n in NUMPY_RAISES])
@pytest.mark.parametrize("prefix", ["", "np.testing.", "numpy.testing."])
def test_each_numpy_testing_assertion(name, cls, prefix):
    args = "IndexError, f, []" if cls == "exception" else "f(1), 2"
    _known_and_misspelt(f"def test_x():\n    {prefix}NAME({args})\n", name, cls)


@pytest.mark.parametrize("name", MATH_CONSTANTS)
def test_each_math_constant_is_a_literal(name):
    _known_and_misspelt("def test_x():\n    assert f() == math.NAME\n", name, "value", "existence")


@pytest.mark.parametrize("name", LITERAL_CONSTRUCTORS)
def test_each_literal_constructor_builds_a_literal(name):
    _known_and_misspelt("def test_x():\n    assert f() == NAME(1)\n", name, "value", "existence")


def test_a_dotted_import_shadows_the_constant_named_by_its_first_part():
    assert classify_file("X = 3\ndef test_a():\n    assert f() == X\n") == {"test_a": "value"}
    assert classify_file("X = 3\ndef test_a():\n    import X.sub\n    assert f() == X\n") == \
        {"test_a": "existence"}


@pytest.mark.parametrize("call", ["pytest.warns(UserWarning)", "warns(UserWarning)"])
def test_warns_with_a_specific_warning_is_an_exception_assertion(call):
    assert classify_test(f"def test_x():\n    with {call}:\n        f()\n") == "exception"
    generic = call.replace("UserWarning", "Warning")
    assert classify_test(f"def test_x():\n    with {generic}:\n        f()\n") == "existence"


def test_only_pytests_fail_is_an_assertion():
    assert classify_test("def test_x():\n    pytest.fail('x')\n") == "existence"
    assert classify_test("def test_x():\n    fail('x')\n") == "existence"
    assert classify_test("def test_x():\n    helper.fail()\n") == "none"


def test_the_expected_exception_may_be_given_by_keyword():
    assert classify_test("def test_x():\n    with pytest.raises(expected_exception=ValueError):\n"
                         "        f()\n") == "exception"
    # another keyword is not the expected exception
    assert classify_test("def test_x():\n    with pytest.raises(match=ValueError):\n        f()\n") == \
        "existence"


@pytest.mark.parametrize("fail", ["fail('no')", "pytest.fail('no')", "self.fail('no')"])
def test_a_try_block_that_fails_when_nothing_is_raised_is_an_exception_assertion(fail):
    src = f"def test_x():\n    try:\n        f()\n        {fail}\n    except ValueError:\n        pass\n"
    assert classify_test(src) == "exception"


def test_a_syntax_error_names_its_file_line_and_column():
    with pytest.raises(ValueError) as info:
        classify_file("def test_a(:\n", "t.py")
    assert str(info.value) == "t.py:1:12: cannot classify assertions, syntax error: invalid syntax"


# ---- edges found by mutating this module (each case distinguishes one rule from its neighbour)

def _one(body: str, params: str = "") -> str:
    return classify_test(f"def test_x({params}):\n" + textwrap.indent(textwrap.dedent(body), "    "))


@pytest.mark.parametrize("body,expected", [
    # dicts: keys and values may be None; every value must be literal; ** of a literal dict
    ("assert f() == {None: 1}\n", "value"),
    ("assert f() == {'a': None}\n", "value"),
    ("assert f() == {'a': g()}\n", "existence"),
    ("assert f() == {**{'a': 1}, 'b': 2}\n", "value"),
    ("assert f() == {**other, 'b': 2}\n", "existence"),
    # a binary operation is literal only when both sides are
    ("assert f() == 2 * g()\n", "existence"),
    ("assert f() == 2 * 3\n", "value"),
    # a comparison of constants only (None counts as a constant there) judges nothing
    ("assert None is None\n", "none"),
    ("assert 1 == None\n", "none"),
    # mock: arguments may be None; no arguments pin nothing
    ("m.assert_called_once_with(1, None)\n", "value"),
    ("m.assert_called_with(key=None)\n", "value"),
    ("m.assert_called_once_with()\n", "existence"),
    # a name rebound by `with ... as` is not a literal
    ("expected = 1\nwith ctx() as expected:\n    pass\nassert f() == expected\n", "existence"),
    ("with ctx():\n    pass\nassert f() == 1\n", "value"),
    # a name bound to a literal through a name bound later in the source
    ("if cond:\n    expected = base + 1\nbase = 2\nassert f() == expected\n", "value"),
    # raising something other than AssertionError is no assertion
    ("raise ValueError('x')\n", "none"),
    ("raise\n", "none"),
    # pytest's raises and warns by their own names only
    ("with raises(ValueError):\n    f()\n", "exception"),
    ("with recorder.raises(ValueError):\n    f()\n", "none"),
    ("with recorder.warns(UserWarning):\n    f()\n", "none"),
    ("with pytest.deprecated_call():\n    f()\n", "exception"),
    ("with deprecated_call():\n    f()\n", "exception"),
    ("with helper.deprecated_call():\n    f()\n", "none"),
    ("with pytest.warns(expected_warning=UserWarning):\n    f()\n", "exception"),
    # generic classes: the builtins' only, however spelt
    ("with pytest.raises(builtins.Exception):\n    f()\n", "existence"),
    ("with pytest.raises(errors.Exception):\n    f()\n", "exception"),
    # try/except: a handler that also catches AssertionError swallows the failure
    ("try:\n    f()\n    pytest.fail('no')\nexcept (ValueError, AssertionError):\n    pass\n",
     "existence"),
    ("try:\n    f()\nexcept ValueError:\n    pass\nelse:\n    assert flag\n", "existence"),
    ("try:\n    f()\nexcept ValueError:\n    pass\nelse:\n    outcome = pytest.fail('no')\n",
     "existence"),
    ("try:\n    f()\nexcept* ValueError:\n    pass\nelse:\n    pytest.fail('no raise')\n",
     "exception"),
])
def test_edges_of_the_rules(body, expected):
    assert _one(body) == expected


@pytest.mark.parametrize("body,expected", [
    ("self.assert_(f())\n", "existence"),
    ("self.fail('no')\n", "existence"),
    ("self.assertIs(f(), True)\n", "value"),
    ("self.assertIn(f(), [1, 2])\n", "value"),
    ("self.assertEqual(first=f(), second=3)\n", "value"),
    ("self.assertEqual(f(), second=3)\n", "value"),
    ("self.assertIn(member=f(), container=[1, 2])\n", "value"),
    ("self.assertIn(f(), container=[1, 2])\n", "value"),
    ("self.assertEqual(first=f())\n", "existence"),
])
def test_unittest_arguments_by_position_or_keyword(body, expected):
    assert _one(body, "self") == expected


@pytest.mark.parametrize("decorators,expected", [
    # by keyword
    ("@pytest.mark.parametrize(argnames='x', argvalues=[1, 2])\n", "value"),
    ("@pytest.mark.parametrize('x', argvalues=[1, 2])\n", "value"),
    ("@pytest.mark.parametrize(argnames='x')\n", "existence"),
    # names as a list; one name takes whole tuples as its values; an empty list fills nothing
    ("@pytest.mark.parametrize(['x'], [1, 2])\n", "value"),
    ("@pytest.mark.parametrize('x', [(1, 2), (3, 4)])\n", "value"),
    ("@pytest.mark.parametrize('x', [])\n", "existence"),
    # another decorator with the same shape fills nothing
    ("@other('x', [1, 2])\n", "existence"),
    ("@functools.wraps\n", "existence"),
    # a decorator before the parametrize does not hide it
    ("@functools.wraps\n@pytest.mark.parametrize('x', [1, 2])\n", "value"),
    # names or values missing, and the parametrize after is still read
    ("@pytest.mark.parametrize(argnames='y')\n@pytest.mark.parametrize('x', [1, 2])\n", "value"),
    ("@pytest.mark.parametrize(argvalues=[1])\n@pytest.mark.parametrize('x', [1, 2])\n", "value"),
    # names held in a variable, or a list of them not all strings: not read
    ("@pytest.mark.parametrize(NAMES, [1, 2])\n", "existence"),
    ("@pytest.mark.parametrize([X], [1, 2])\n", "existence"),
    ("@pytest.mark.parametrize(['x', Y], [(1, 2)])\n", "existence"),
    # an indirect parametrize does not stop the ones after it
    ("@pytest.mark.parametrize('y', [1], indirect=True)\n"
     "@pytest.mark.parametrize('x', [1, 2])\n", "value"),
])
def test_parametrize_fills_a_parameter_with_literals(decorators, expected):
    src = decorators + "def test_x(x, y=None):\n    assert f() == x\n"
    assert classify_test(src) == expected


def test_every_kind_of_parameter_shadows_a_module_constant():
    for params in ("x", "x, /", "*, x", "*x", "**x", "a, *x", "a, **x"):
        src = f"x = 1\n\ndef test_a({params}):\n    assert f() == x\n"
        assert classify_file(src) == {"test_a": "existence"}, params
    assert classify_file("x = 1\n\ndef test_a(a):\n    assert f() == x\n") == {"test_a": "value"}


def test_a_lone_function_is_classified_whatever_its_name():
    assert classify_test("def check():\n    assert f() == 1\n") == "value"


def test_a_test_case_base_by_any_spelling():
    for base in ("TestCase", "unittest.TestCase", "django.test.TestCase"):
        src = f"class Cases({base}):\n    def test_a(self):\n        assert f() == 1\n"
        assert classify_file(src) == {"Cases::test_a": "value"}, base
    assert classify_file("class Cases(make_base()):\n    def test_a(self):\n        pass\n") == {}
    assert classify_file("class Cases(TestCaseMixin):\n    def test_a(self):\n        pass\n") == {}


def test_classify_file_names_the_source_when_it_has_no_file_name():
    with pytest.raises(ValueError) as info:
        classify_file("def test_a(:\n")
    assert str(info.value).startswith("<string>:1:")


@pytest.mark.parametrize("body,expected", [
    # a starred literal, an f-string of literals (a None inside braces is the text "None")
    ("assert f() == [*[1, 2], 3]\n", "value"),
    ("assert f() == [*xs]\n", "existence"),
    ("assert f() == f'a{1}b'\n", "value"),
    ("assert f() == f'{None}'\n", "value"),
    ("assert f() == f'a{x}'\n", "existence"),
    # tuple unpacking pairs names with values; a length mismatch or a star pairs nothing
    ("a, b = 1, 2\nassert f() == b\n", "value"),
    ("[a, b] = [1, 2]\nassert f() == a\n", "value"),
    ("a, b = 1, g()\nassert f() == b\n", "existence"),
    ("a, b = 1, 2, 3\nassert f() == a\n", "existence"),
    ("a, *b = 1, 2\nassert f() == a\n", "existence"),
    ("a, b = 1, *c\nassert f() == a\n", "existence"),
    ("a, b = pair\nassert f() == a\n", "existence"),
    # a failure at the end of a try body: AssertionError only, and only one that is raised
    ("try:\n    f()\n    raise AssertionError('no')\nexcept ValueError:\n    pass\n", "exception"),
    ("try:\n    f()\n    raise AssertionError\nexcept ValueError:\n    pass\n", "exception"),
    ("try:\n    f()\n    raise ValueError('no')\nexcept KeyError:\n    pass\n", "none"),
    ("try:\n    f()\n    raise\nexcept ValueError:\n    pass\n", "none"),
])
def test_literals_through_stars_f_strings_unpacking_and_raised_failures(body, expected):
    assert _one(body) == expected


@pytest.mark.parametrize("decorators,expected", [
    # a row of the wrong shape or length: nothing is known of any parameter
    ("@pytest.mark.parametrize('x, y', [(1, 2), 3])\n", "existence"),
    ("@pytest.mark.parametrize('x, y', [(1, 2), (3,)])\n", "existence"),
    ("@pytest.mark.parametrize('x, y', [(1, 2), (3, 4, 5)])\n", "existence"),
    ("@pytest.mark.parametrize('x, y', [(1, 2), pytest.param(3)])\n", "existence"),
    ("@pytest.mark.parametrize('x, y', [(1, 2), [3, 4]])\n", "value"),
    # and a parametrize after an unreadable one is still read
    ("@pytest.mark.parametrize('y, z', [5])\n@pytest.mark.parametrize('x', [1, 2])\n", "value"),
])
def test_a_parametrize_is_read_only_when_every_row_has_one_value_per_name(decorators, expected):
    src = decorators + "def test_x(x, y=None, z=None):\n    assert f() == x\n"
    assert classify_test(src) == expected


def test_a_module_name_a_function_declares_global_is_not_a_constant():
    src = ("X = 1\n\ndef reset():\n    global X\n    X = 2\n\n"
           "def test_a():\n    assert f() == X\n")
    assert classify_file(src) == {"test_a": "existence"}
    assert classify_file(src.replace("    global X\n", "")) == {"test_a": "value"}


def test_classify_test_takes_a_definition_or_text_only():
    with pytest.raises(TypeError, match="got int"):
        classify_test(42)
    with pytest.raises(TypeError, match="got Module"):
        classify_test(ast.parse("x = 1"))
