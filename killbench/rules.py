"""The benchmark's rules for a run: budgets and the gate's settings, pre-registered in
``manifests/rules.toml``. A run records the budgets it used and whether they are the rules'."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tomli

from .errors import UserError
from .evidence import Budgets
from .locations import benchmark_dir

RULES_FILE = "rules.toml"


@dataclass(frozen=True)
class Rules:
    tokens_per_target: int = 200_000
    gate_calls_per_task: int = 10
    gate_calls_min: int = 20
    seconds_per_task: float = 240.0
    seconds_min: float = 600.0
    gate_timeout_s: float = 60.0
    isolation: str = "bwrap"

    def budgets(self, tasks: int, needs_model: bool) -> Budgets:
        return Budgets(tokens=self.tokens_per_target if needs_model else None,
                       gate_calls=max(self.gate_calls_min, self.gate_calls_per_task * tasks),
                       seconds=float(max(self.seconds_min, self.seconds_per_task * tasks)))

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def load_rules(path: Path | None = None) -> Rules:
    path = path or benchmark_dir("manifests") / RULES_FILE
    if not path.exists():
        raise UserError(f"{path}: the benchmark's run rules are missing (this installation has "
                        "no manifests directory)")
    data = tomli.loads(path.read_text())
    data.pop("schema", None)
    known = set(Rules.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(f"{path}: unknown keys {unknown}; known: {sorted(known)}")
    return Rules(**data)
