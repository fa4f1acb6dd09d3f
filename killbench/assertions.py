"""The assertion class of a test, read from its syntax tree without running it.

A kill by a test that only checks "something came back" means less than a kill by
one that pins the answer; the report shows kills per class, so the class must be
decided by fixed, documented rules.

Classes, strongest first (``ASSERTION_CLASSES``):

- ``value``: pins a concrete expected value. ``assert <expr> == <literal>`` (either
  side, also ``is`` and chained comparisons), ``assert <expr> in <literal container>``,
  ``assertEqual``-family, ``assertIs``/``assertIn`` against literals, and mock
  ``assert_called_with``-family calls whose arguments are all literal.
- ``exception``: expects a specific raise. ``pytest.raises(E)`` (context manager or
  call form, with or without ``match=``), ``self.assertRaises(E, ...)`` and
  ``assertRaisesRegex``, the ``try: ... except E: ... else: fail`` pattern (the failure
  may also be the last statement of the ``try`` body, unless a handler catches
  ``AssertionError`` and so swallows it). Expecting a specific warning
  (``pytest.warns(W)``, ``assertWarns``, ``pytest.deprecated_call()``) counts too.
- ``existence``: checks that something holds without pinning it: truthiness
  (``assert x``, ``assert not x``), ``is None``/``is not None``, ``isinstance``,
  ``hasattr``, ``callable``, ordering comparisons (``len(x) > 0``), ``!=``,
  ``<literal> in x`` (presence of a member), comparisons with no literal side,
  ``assertTrue``/``assertIsNotNone``/``assertGreater`` and friends, a hand-written
  failure (``pytest.fail()``, ``self.fail()``, ``assert False``,
  ``raise AssertionError``) outside the try pattern, and ``raises``/``warns`` of a
  generic class (``Exception``, ``BaseException``, ``Warning``).
- ``none``: asserts nothing (also: only tautologies such as ``assert True`` or
  ``assert 1 == 1``, where no side involves the code under test).

A test takes the strongest class of any assertion in its own body. Decisions:

- Syntax only, no data flow beyond the literal rule below and no reachability: an
  assertion after the raising call inside ``pytest.raises`` still counts.
- Assertions inside helpers the test calls are not counted, nor those inside nested
  ``def``/``lambda``/``class`` bodies of the test: we never follow calls. Recognised
  assertion APIs are the ``assert`` statement, pytest (``raises``, ``warns``,
  ``deprecated_call``, ``fail``, ``approx``), ``unittest.TestCase`` methods, mock
  ``assert_*`` methods and ``numpy.testing``'s ``assert_*`` functions
  (``assert_equal``-family behaves like ``assertEqual``, ``assert_raises`` like
  ``assertRaises``, ``assert_`` is truthiness).
- Literal: a constant other than ``None`` (numbers, strings, bytes, ``True``/``False``,
  ``...``); tuples/lists/sets/dicts of literals (``None`` allowed inside); unary and
  binary operators over literals (``-1``, ``2 ** 64``); f-strings of literals;
  ``math.pi``/``e``/``tau``/``inf``/``nan``; ``pytest.approx``, ``mock.call`` and
  builtin constructors (``frozenset``, ``float``, ``Decimal``, ...) applied to
  literals. A name is a literal when every binding of it in the test is a literal
  (``expected = [1, 2]`` earlier in the function), when it is a parameter that
  ``pytest.mark.parametrize`` fills with literals only, or (in ``classify_file``)
  when it is a module constant bound only to literals; a name that is mutated
  (``expected.append(...)``, ``expected[0] = ...``) is not a literal.
- Comparing with ``None`` (``==``, ``is``, either negation) is existence: it checks
  presence or absence, not a value. ``is True``/``is False``/``== True`` pin the exact
  boolean and are value; plain ``assert x`` accepts any truthy object and is existence.
- Computed oracles (``assert f(x) == g(x)``, ``assert out == sorted(data)``) are
  existence: neither side is a concrete value. The class must never overstate.
- ``and`` of assertions takes the strongest operand, ``or`` the weakest (only one
  needs to hold).
- Purely syntactic, so ``assert len(x) == 0`` is value and enum members such as
  ``Color.RED`` are not literals.
"""

from __future__ import annotations

import ast
import textwrap

ASSERTION_CLASSES = ("value", "exception", "existence", "none")

_RANK = {name: i for i, name in enumerate(ASSERTION_CLASSES)}  # lower is stronger

_GENERIC_EXCEPTIONS = {"Exception", "BaseException"}
_GENERIC_WARNINGS = {"Warning"}

_MATH_CONSTANTS = {"pi", "e", "tau", "inf", "nan"}

# Calls that build a concrete value from literal arguments, by dotted name.
_LITERAL_CONSTRUCTORS = {
    "frozenset",
    "set",
    "tuple",
    "list",
    "dict",
    "float",
    "int",
    "complex",
    "str",
    "bytes",
    "bytearray",
    "Decimal",
    "decimal.Decimal",
    "Fraction",
    "fractions.Fraction",
    "approx",
    "pytest.approx",
    "call",
    "mock.call",
    "unittest.mock.call",
}

# unittest methods that compare two values: value when one side is a literal.
_EQUALITY_METHODS = {
    "assertEqual",
    "assertEquals",
    "failUnlessEqual",
    "assertAlmostEqual",
    "assertAlmostEquals",
    "failUnlessAlmostEqual",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
    "assertSetEqual",
    "assertSequenceEqual",
    "assertMultiLineEqual",
    "assertCountEqual",
    "assertItemsEqual",
}
_EXISTENCE_METHODS = {
    "assertTrue",
    "assertFalse",
    "failUnless",
    "failIf",
    "assertIsNone",
    "assertIsNotNone",
    "assertIsInstance",
    "assertNotIsInstance",
    "assertNotIn",
    "assertNotEqual",
    "assertNotEquals",
    "failIfEqual",
    "assertNotAlmostEqual",
    "assertNotAlmostEquals",
    "assertGreater",
    "assertGreaterEqual",
    "assertLess",
    "assertLessEqual",
    "assertRegex",
    "assertRegexpMatches",
    "assertNotRegex",
    "assertNotRegexpMatches",
    "assertLogs",
    "assertNoLogs",
    "assertDictContainsSubset",
    "assertIsNot",
    # mock assertions that do not pin arguments
    "assert_called",
    "assert_called_once",
    "assert_not_called",
    "assert_awaited",
    "assert_awaited_once",
    "assert_not_awaited",
}
_RAISES_METHODS = {"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "failUnlessRaises"}
_WARNS_METHODS = {"assertWarns", "assertWarnsRegex"}
# numpy.testing's documented assertion functions, called bare or as np.testing.X.
_NUMPY_EQUALITY = {
    "assert_equal",
    "assert_array_equal",
    "assert_almost_equal",
    "assert_array_almost_equal",
    "assert_approx_equal",
    "assert_allclose",
    "assert_array_almost_equal_nulp",
}
_NUMPY_EXISTENCE = {"assert_", "assert_array_less", "assert_string_equal"}
_NUMPY_RAISES = {"assert_raises", "assert_raises_regex"}
_NUMPY_WARNS = {"assert_warns"}

_MOCK_ARGUMENT_METHODS = {
    "assert_called_with",
    "assert_called_once_with",
    "assert_any_call",
    "assert_has_calls",
    "assert_awaited_with",
    "assert_awaited_once_with",
    "assert_any_await",
    "assert_has_awaits",
}


def _strongest(classes) -> str:
    return min(classes, key=_RANK.__getitem__, default="none")


def _weakest(classes) -> str:
    """Of the operands of an ``or`` (never none)."""
    return max(classes, key=_RANK.__getitem__)


def _dotted(node: ast.AST) -> str | None:
    """'pytest.mark.parametrize' for that attribute chain, None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Literals:
    """Decides which expressions are concrete values, resolving simple names."""

    def __init__(self, literal_names: set[str]):
        self.literal_names = literal_names

    def is_literal(self, node: ast.AST, allow_none: bool = False) -> bool:
        if isinstance(node, ast.Constant):
            return allow_none or node.value is not None
        if isinstance(node, ast.Name):
            return node.id in self.literal_names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self.is_literal(e, allow_none=True) for e in node.elts)
        if isinstance(node, ast.Starred):
            return self.is_literal(node.value)
        if isinstance(node, ast.Dict):
            return all(
                (k is None or self.is_literal(k, allow_none=True))
                and self.is_literal(v, allow_none=True)
                for k, v in zip(node.keys, node.values, strict=True)  # pragma: no mutate (equal lengths in every ast.Dict)
            )
        if isinstance(node, ast.UnaryOp):
            return self.is_literal(node.operand)
        if isinstance(node, ast.BinOp):
            return self.is_literal(node.left) and self.is_literal(node.right)
        if isinstance(node, ast.JoinedStr):
            return all(self.is_literal(v) for v in node.values)
        if isinstance(node, ast.FormattedValue):
            return self.is_literal(node.value, allow_none=True)
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            return (
                dotted is not None and dotted.startswith("math.") and node.attr in _MATH_CONSTANTS
            )
        if isinstance(node, ast.Call):
            return _dotted(node.func) in _LITERAL_CONSTRUCTORS and self.arguments_literal(node)
        return False  # pragma: no mutate (None is as false to every caller)

    def arguments_literal(self, call: ast.Call) -> bool:
        return all(self.is_literal(a, allow_none=True) for a in call.args) and all(
            self.is_literal(kw.value, allow_none=True) for kw in call.keywords
        )


# ---------------------------------------------------------------- literal names


def _binding_targets(node: ast.AST):
    """(target, value or None) for each name binding a statement makes."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _pair_targets(target, node.value)
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
        yield from _pair_targets(node.target, node.value)
    elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension)):
        yield from _pair_targets(node.target, None)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        yield from _pair_targets(node.optional_vars, None)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield ast.Name(id=node.name), None
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield ast.Name(id=(alias.asname or alias.name).split(".")[0]), None
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield ast.Name(id=node.name), None
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        for name in node.names:
            yield ast.Name(id=name), None
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield ast.Name(id=node.name), None
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield ast.Name(id=node.rest), None


def _name_bindings(nodes) -> dict[str, list[ast.AST | None]]:
    """Every value each plain name is bound to (None where the value is unknown).

    Stores into attributes or items are not bindings; _mutated_names covers them.
    """
    bindings: dict[str, list[ast.AST | None]] = {}
    for node in nodes:
        for target, value in _binding_targets(node):
            if isinstance(target, ast.Name):
                bindings.setdefault(target.id, []).append(value)
    return bindings


def _pair_targets(target: ast.AST, value: ast.AST | None):
    if isinstance(target, (ast.Tuple, ast.List)):
        if (
            isinstance(value, (ast.Tuple, ast.List))
            and len(value.elts) == len(target.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)
        ):
            for t, v in zip(target.elts, value.elts):  # lengths equal, checked above
                yield from _pair_targets(t, v)
        else:
            for t in target.elts:
                yield from _pair_targets(t.value if isinstance(t, ast.Starred) else t, None)
    else:
        yield target, value


def _mutated_names(nodes) -> set[str]:
    """Names used as the base of a method call, item or attribute store: not constants."""
    mutated = set()
    for node in nodes:
        base = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(
            node.ctx, (ast.Store, ast.Del)
        ):
            base = node.value
        if isinstance(base, ast.Name):
            mutated.add(base.id)
    return mutated


def _resolve_literal_names(
    bindings: dict[str, list[ast.AST | None]], known: set[str], mutated: set[str]
) -> set[str]:
    """Names whose every binding is a literal, following names bound to such names."""
    literal = set(known)
    changed = True
    while changed:
        changed = False
        checker = _Literals(literal)
        for name, values in bindings.items():
            if name in literal or name in mutated:
                continue
            if values and all(v is not None and checker.is_literal(v) for v in values):
                literal.add(name)
                changed = True
    return literal - mutated


def _module_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound only to literals (and never mutated or rebound)."""
    bindings = _name_bindings(_scope_nodes(tree.body))
    mutated = _mutated_names(ast.walk(tree))
    # A function that declares a name global may rebind it: not a constant.
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            mutated.update(node.names)
    return _resolve_literal_names(bindings, set(), mutated)


def _parametrized_literal_names(
    func: ast.FunctionDef | ast.AsyncFunctionDef, literals: _Literals
) -> set[str]:
    """Parameters that pytest.mark.parametrize fills with literal values only."""
    names: set[str] = set()
    for dec in func.decorator_list:
        if not (isinstance(dec, ast.Call) and _last_name(dec.func) == "parametrize"):
            continue
        keywords = {kw.arg: kw.value for kw in dec.keywords}
        argnames = dec.args[0] if dec.args else keywords.get("argnames")
        argvalues = dec.args[1] if len(dec.args) > 1 else keywords.get("argvalues")
        indirect = keywords.get("indirect")
        if indirect is not None and not (
            isinstance(indirect, ast.Constant) and indirect.value is False
        ):
            continue  # values go to fixtures, not straight into the test
        if isinstance(argnames, ast.Constant) and isinstance(argnames.value, str):
            params = [p.strip() for p in argnames.value.split(",") if p.strip()]
        elif isinstance(argnames, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in argnames.elts
        ):
            params = [e.value for e in argnames.elts]
        else:
            continue
        if not isinstance(argvalues, (ast.List, ast.Tuple)):
            continue
        columns = _parametrize_columns(params, argvalues.elts)
        if columns is None:
            continue
        for param, column in zip(params, columns, strict=True):  # pragma: no mutate (one column per param)
            if column and all(literals.is_literal(v) for v in column):
                names.add(param)
    return names


def _parametrize_columns(params: list[str], rows: list[ast.AST]) -> list[list[ast.AST]] | None:
    """Each parameter's values over the rows of a parametrize, or None when a row's shape
    cannot be read (then nothing is known of any parameter)."""
    columns: list[list[ast.AST]] = [[] for _ in params]
    for row in rows:
        if isinstance(row, ast.Call) and _last_name(row.func) == "param":
            values = list(row.args)
        elif len(params) == 1:
            values = [row]
        elif isinstance(row, (ast.Tuple, ast.List)):
            values = list(row.elts)
        else:
            return None
        if len(values) != len(params):
            return None
        for column, value in zip(columns, values, strict=True):  # pragma: no mutate (lengths checked above)
            column.append(value)
    return columns


# ---------------------------------------------------------------- the classifier


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _scope_nodes(body: list[ast.stmt]):
    """Every node of one scope's body; nested def/class/lambda nodes but not their insides."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


class _Classifier:
    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef, module_constants: set[str]):
        self.func = func
        nodes = list(_scope_nodes(func.body))
        bindings = _name_bindings(nodes)
        args = func.args
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        parametrized = _parametrized_literal_names(func, _Literals(set(module_constants)))
        for param in params:
            if param not in parametrized:
                bindings.setdefault(param, []).append(None)
        # A module constant or parametrized name that the test rebinds is judged by
        # its local bindings alone.
        outer = (set(module_constants) | parametrized) - set(bindings)
        self.literals = _Literals(_resolve_literal_names(bindings, outer, _mutated_names(nodes)))
        self.nodes = nodes

    def classify(self) -> str:
        found = []
        for node in self.nodes:
            if isinstance(node, ast.Assert):
                found.append(self._assert(node.test))
            elif isinstance(node, ast.Call):
                cls = self._call(node)
                if cls is not None:
                    found.append(cls)
            elif isinstance(node, ast.Raise):
                if node.exc is not None and _exception_name(node.exc) == "AssertionError":
                    found.append("existence")
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                if self._try_expects_raise(node):
                    found.append("exception")
        return _strongest(found)

    # -- assert statements

    def _assert(self, test: ast.AST) -> str:
        if isinstance(test, ast.Constant):
            return "existence" if not test.value else "none"  # assert False: a failure
        if isinstance(test, ast.BoolOp):
            parts = [self._assert(v) for v in test.values]
            return _strongest(parts) if isinstance(test.op, ast.And) else _weakest(parts)
        if isinstance(test, ast.Compare):
            left = test.left
            parts = []
            for op, right in zip(test.ops, test.comparators, strict=True):  # pragma: no mutate (equal lengths in every ast.Compare)
                parts.append(self._comparison(left, op, right))
                left = right
            return _strongest(parts)
        return "existence"  # truthiness, not, isinstance(), hasattr(), all(), ...

    def _comparison(self, left: ast.AST, op: ast.cmpop, right: ast.AST) -> str:
        lit = self.literals.is_literal
        if lit(left, allow_none=True) and lit(right, allow_none=True):
            return "none"  # about constants only: a tautology or a certain failure
        if not isinstance(op, (ast.Eq, ast.Is, ast.In)):
            return "existence"  # !=, is not, not in, <, <=, >, >=
        # None is no literal here, so "== None" and "is None" fall through to existence.
        if isinstance(op, ast.In):
            # x in {1, 2} pins x to listed values; 3 in x only checks membership.
            return "value" if lit(right) else "existence"
        return "value" if (lit(left) or lit(right)) else "existence"

    # -- calls

    def _call(self, call: ast.Call) -> str | None:
        func = call.func
        name = _last_name(func)
        dotted = _dotted(func)
        if name is None:
            return None
        if name in ("raises",) and (dotted in ("raises", "pytest.raises")):
            return self._expected_raise(call, _GENERIC_EXCEPTIONS)
        if name == "warns" and dotted in ("warns", "pytest.warns"):
            return self._expected_raise(call, _GENERIC_WARNINGS)
        if name == "deprecated_call" and dotted in ("deprecated_call", "pytest.deprecated_call"):
            return "exception"
        if name == "fail" and dotted in ("fail", "pytest.fail", "self.fail"):
            return "existence"
        if name in _NUMPY_EQUALITY:
            return self._pair(call, ast.Eq())
        if name in _NUMPY_RAISES:
            return self._expected_raise(call, _GENERIC_EXCEPTIONS)
        if name in _NUMPY_WARNS:
            return self._expected_raise(call, _GENERIC_WARNINGS)
        if name in _NUMPY_EXISTENCE:
            return "existence"
        if not isinstance(func, ast.Attribute):
            return None
        if name in _RAISES_METHODS:
            return self._expected_raise(call, _GENERIC_EXCEPTIONS)
        if name in _WARNS_METHODS:
            return self._expected_raise(call, _GENERIC_WARNINGS)
        if name in _EQUALITY_METHODS:
            return self._pair(call, ast.Eq())
        if name == "assertIs":
            return self._pair(call, ast.Is())
        if name == "assertIn":
            return self._pair(call, ast.In())
        if name in _EXISTENCE_METHODS:
            return "existence"
        if name in _MOCK_ARGUMENT_METHODS:
            has_arguments = bool(call.args or call.keywords)
            return (
                "value" if has_arguments and self.literals.arguments_literal(call) else "existence"
            )
        return None

    def _pair(self, call: ast.Call, op: ast.cmpop) -> str:
        args = list(call.args)
        keywords = {kw.arg: kw.value for kw in call.keywords}
        for key in ("first", "member"):
            if key in keywords and len(args) == 0:
                args.append(keywords[key])
        for key in ("second", "container"):
            if key in keywords and len(args) == 1:
                args.append(keywords[key])
        if len(args) < 2:
            return "existence"
        return self._comparison(args[0], op, args[1])

    def _expected_raise(self, call: ast.Call, generic: set[str]) -> str:
        expected = call.args[0] if call.args else None
        for kw in call.keywords:
            if (
                kw.arg in ("expected_exception", "expected_warning")
                and expected is None
            ):
                expected = kw.value
        if expected is None:
            return "existence"
        return "existence" if _is_generic(expected, generic) else "exception"

    # -- try: ... except E: ... else: fail

    def _try_expects_raise(self, node: ast.AST) -> bool:
        specific = [
            h
            for h in node.handlers
            if h.type is not None and not _is_generic(h.type, _GENERIC_EXCEPTIONS)
        ]
        if not specific:
            return False  # pragma: no mutate (None is as false to its one caller)
        if any(_is_failure(stmt) for stmt in node.orelse):
            return True
        if node.body and _is_failure(node.body[-1]):
            # A failure raised inside the try is swallowed if a handler catches it.
            return not any(_catches_assertion_error(h.type) for h in specific)
        return False  # pragma: no mutate (None is as false to its one caller)


def _exception_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    return _last_name(node)


def _is_generic(node: ast.AST, generic: set[str]) -> bool:
    """True for Exception / BaseException (or Warning), or a tuple that contains one."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_is_generic(e, generic) for e in node.elts)
    dotted = _dotted(node)
    return (
        dotted is not None
        and dotted.split(".")[-1] in generic
        and ("." not in dotted or dotted.startswith("builtins."))
    )


def _catches_assertion_error(node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_catches_assertion_error(e) for e in node.elts)
    return _last_name(node) == "AssertionError"


def _is_failure(stmt: ast.stmt) -> bool:
    """pytest.fail(...), self.fail(...), assert False, raise AssertionError."""
    if isinstance(stmt, ast.Assert):
        return isinstance(stmt.test, ast.Constant) and not stmt.test.value
    if isinstance(stmt, ast.Raise):
        return stmt.exc is not None and _exception_name(stmt.exc) == "AssertionError"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return _dotted(stmt.value.func) in ("fail", "pytest.fail", "self.fail")
    return False  # pragma: no mutate (None is as false to every caller: any())


# ---------------------------------------------------------------- public API


def _parse(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        where = f"{filename}:{exc.lineno}" if exc.lineno else filename
        if exc.lineno and exc.offset:  # pragma: no mutate (only the message wording depends on it)
            where += f":{exc.offset}"
        raise ValueError(f"{where}: cannot classify assertions, syntax error: {exc.msg}") from exc


def classify_test(
    func_source_or_node: str | ast.FunctionDef | ast.AsyncFunctionDef,
    *,
    filename: str = "<test>",
    module_constants: set[str] | frozenset[str] = frozenset(),
) -> str:
    """Assertion class of one test function, so kills can be reported per class.

    Accepts the function's node or its source (indented source, as cut from a
    class, is dedented). Source holding several functions must contain exactly one
    ``test_*`` function. ``module_constants`` names module-level literals the test may
    compare against (``classify_file`` fills it in).
    """
    if isinstance(func_source_or_node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        func = func_source_or_node
    elif isinstance(func_source_or_node, str):
        tree = _parse(textwrap.dedent(func_source_or_node), filename)
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if len(defs) != 1:
            defs = [d for d in defs if d.name.startswith("test")]
        if len(defs) != 1:
            raise ValueError(
                f"{filename}: expected exactly one test function, found {len(defs) or 'none'}"
            )
        func = defs[0]
    else:
        raise TypeError(
            "classify_test takes a function definition node or its source text, got "
            f"{type(func_source_or_node).__name__}"
        )
    return _Classifier(func, set(module_constants)).classify()


def _is_test_class(node: ast.ClassDef) -> bool:
    if node.name.startswith("Test"):
        return True
    dotted = [_dotted(base) for base in node.bases]
    return any(d is not None and d.split(".")[-1] == "TestCase" for d in dotted)


def classify_file(source: str, filename: str = "<string>") -> dict[str, str]:
    """Assertion class of every test in a module, keyed like pytest node ids.

    Collected as pytest does by default: top-level functions whose name starts with
    ``test``, and such methods of ``Test*`` classes and of ``unittest.TestCase``
    subclasses (nested classes too), named ``Class::method`` (``Outer::Inner::method``).
    """
    tree = _parse(source, filename)
    constants = _module_constants(tree)
    result: dict[str, str] = {}

    def visit(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("test"):
                    result[prefix + node.name] = _Classifier(node, constants).classify()
            elif isinstance(node, ast.ClassDef) and _is_test_class(node):
                visit(node.body, f"{prefix}{node.name}::")

    visit(tree.body, "")
    return result
