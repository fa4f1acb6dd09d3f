"""Reading and validating target specifications: pins in targets/*.toml and the
``[tool.killbench]`` table of a local project.

Both produce one ``TargetSpec``; nothing is guessed: a missing key is an error that
names the key and shows what to add.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import tomli

from .errors import UserError
from .locations import benchmark_dir

PIN_KEYS = ("name", "version", "sdist_sha256", "import_names", "mutate", "tests", "test_requires")
LOCAL_KEYS = ("mutate", "tests", "test_requires")
# every key a pin or a [tool.killbench] table may have: anything else is a misspelling
PIN_ALLOWED = PIN_KEYS + ("schema", "exclude", "pytest_args", "deselect", "measured")
LOCAL_ALLOWED = LOCAL_KEYS + ("name", "exclude", "pytest_args", "import_names", "deselect")


def _no_unknown_keys(table: dict, allowed: tuple[str, ...], where: str) -> None:
    """A misspelt key (`excludes`) would silently not apply: refuse it, naming the nearest."""
    import difflib

    for key in sorted(set(table) - set(allowed)):
        near = difflib.get_close_matches(key, allowed, n=1)
        hint = f"did you mean `{near[0]}`?" if near else f"the keys are: {', '.join(sorted(allowed))}"
        raise UserError(f"{where}: unknown key `{key}`; {hint}")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Deselect:
    id: str
    reason: str


@dataclass(frozen=True)
class TargetSpec:
    """What to mutate and how to run the suite, for a pin or a local project."""

    name: str
    kind: str  # "pin" or "local"
    mutate: tuple[str, ...]  # paths relative to the project root
    tests: tuple[str, ...]  # pytest path arguments relative to the project root
    test_requires: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()
    deselect: tuple[Deselect, ...] = ()
    import_names: tuple[str, ...] = ()  # empty: derived from the mutated files
    version: str | None = None  # pins only
    sdist_sha256: str | None = None  # pins only
    project_dir: Path | None = None  # local only
    source_file: Path | None = None  # the file this spec was read from
    extra: dict = field(default_factory=dict, compare=False)

    def canonical(self) -> dict:
        """The fields that decide results: hashed into the target fingerprint."""
        return {
            "name": self.name,
            "kind": self.kind,
            "version": self.version,
            "sdist_sha256": self.sdist_sha256,
            "mutate": list(self.mutate),
            "exclude": list(self.exclude),
            "tests": list(self.tests),
            "pytest_args": list(self.pytest_args),
            "deselect": [d.id for d in self.deselect],
            "test_requires": list(self.test_requires),
            "import_names": list(self.import_names),
        }

    def spec_hash(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()


def _str_list(table: dict, key: str, where: str, required: bool) -> tuple[str, ...]:
    if key not in table:
        if required:
            raise UserError(f"{where}: missing key `{key}`; add e.g. `{key} = [\"...\"]`")
        return ()
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: `{key}` must be a list of strings, got {value!r}")
    return tuple(value)


def _deselects(table: dict, where: str) -> tuple[Deselect, ...]:
    out = []
    for item in table.get("deselect", []):
        if isinstance(item, str):
            raise UserError(f"{where}: each `deselect` entry needs a reason: "
                            f'{{ id = "{item}", reason = "why" }}')
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) \
                or not isinstance(item.get("reason"), str) or not item["reason"].strip():
            raise UserError(f"{where}: `deselect` entries are {{ id = \"...\", reason = \"...\" }}, "
                            f"got {item!r}")
        out.append(Deselect(item["id"], item["reason"]))
    return tuple(out)


def _load_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomli.load(fh)
    except tomli.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None


def load_pin(path: Path) -> TargetSpec:
    """Read one targets/NAME.toml."""
    data = _load_toml(path)
    where = str(path)
    _no_unknown_keys(data, PIN_ALLOWED, where)
    for key in PIN_KEYS:
        if key not in data:
            raise UserError(f"{where}: missing key `{key}` (a pin needs: {', '.join(PIN_KEYS)})")
    for key in ("name", "version", "sdist_sha256"):
        if not isinstance(data[key], str) or not data[key]:
            raise UserError(f"{where}: `{key}` must be a non-empty string")
    sha = data["sdist_sha256"].lower()
    if not _SHA256.match(sha):
        raise UserError(f"{where}: `sdist_sha256` must be 64 hex digits, got {data['sdist_sha256']!r}")
    if data.get("schema", 1) != 1:
        raise UserError(f"{where}: unknown pin schema {data.get('schema')!r}; this killbench reads schema 1")
    return TargetSpec(
        name=data["name"],
        kind="pin",
        version=data["version"],
        sdist_sha256=sha,
        import_names=_str_list(data, "import_names", where, True),
        mutate=_str_list(data, "mutate", where, True),
        exclude=_str_list(data, "exclude", where, False),
        tests=_str_list(data, "tests", where, True),
        pytest_args=_str_list(data, "pytest_args", where, False),
        test_requires=_str_list(data, "test_requires", where, True),
        deselect=_deselects(data, where),
        source_file=path,
        extra={"measured": data.get("measured", {})},
    )


def load_local(project_dir: Path) -> TargetSpec:
    """Read ``[tool.killbench]`` from a project's pyproject.toml."""
    pyproject = project_dir / "pyproject.toml"
    if not pyproject.is_file():
        raise UserError(f"{project_dir}: no pyproject.toml; a local target needs one with a "
                        "[tool.killbench] table (mutate, tests, test_requires)")
    data = _load_toml(pyproject)
    table = data.get("tool", {}).get("killbench")
    where = f"{pyproject} [tool.killbench]"
    if table is None:
        raise UserError(f"{pyproject}: no [tool.killbench] table; add:\n"
                        "  [tool.killbench]\n  mutate = [\"src/yourpkg\"]\n"
                        "  tests = [\"tests\"]\n  test_requires = [\"pytest\"]")
    _no_unknown_keys(table, LOCAL_ALLOWED, where)
    missing = [k for k in LOCAL_KEYS if k not in table]
    if missing:
        raise UserError(f"{where}: missing {', '.join('`' + k + '`' for k in missing)}; "
                        "a local target needs mutate (source paths), tests (test paths) and "
                        "test_requires (extra requirements, may be [])")
    name = table.get("name") or data.get("project", {}).get("name") or project_dir.name
    spec = TargetSpec(
        name=str(name),
        kind="local",
        mutate=_str_list(table, "mutate", where, True),
        exclude=_str_list(table, "exclude", where, False),
        tests=_str_list(table, "tests", where, True),
        pytest_args=_str_list(table, "pytest_args", where, False),
        test_requires=_str_list(table, "test_requires", where, True),
        import_names=_str_list(table, "import_names", where, False),
        deselect=_deselects(table, where),
        project_dir=project_dir.resolve(),
        source_file=pyproject,
    )
    # with --pyargs, `tests` are module names, not paths
    paths = spec.mutate + (() if "--pyargs" in spec.pytest_args else spec.tests)
    for rel in paths:
        if not (project_dir / rel).exists():
            raise UserError(f"{where}: path {rel!r} does not exist under {project_dir}")
    return spec


def targets_dir() -> Path:
    """The pins shipped with the benchmark (checkout or installed package)."""
    return benchmark_dir("targets")


def list_pins(directory: Path | None = None) -> list[Path]:
    directory = directory or targets_dir()
    return sorted(directory.glob("*.toml"))


def resolve(target: str, pins_dir: Path | None = None) -> TargetSpec:
    """A TARGET argument: a pin name from targets/, a pin file, or a project directory."""
    path = Path(target)
    if path.is_dir():
        return load_local(path)
    if path.suffix == ".toml" and path.is_file():
        return load_pin(path)
    pin = (pins_dir or targets_dir()) / f"{target}.toml"
    if pin.is_file():
        return load_pin(pin)
    known = ", ".join(p.stem for p in list_pins(pins_dir)) or "none"
    raise UserError(f"unknown target {target!r}: not a directory with a pyproject.toml and not a "
                    f"pin in {pins_dir or targets_dir()} (known pins: {known})")
