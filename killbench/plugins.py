"""The generator registry: entry points of the group ``killbench.generators`` and
``module:attr`` references. The built-in generators register through exactly the
same entry-point mechanism a user's package uses."""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points

from .errors import UserError

GROUP = "killbench.generators"


def registered() -> dict[str, str]:
    """name -> "module:attr" of every generator installed by entry point."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def _load_ref(ref: str):
    module, _, attr = ref.partition(":")
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        raise UserError(f"generator {ref!r}: cannot import module {module!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UserError(f"generator {ref!r}: {module!r} has no attribute {attr!r}") from None
    return obj


def load_generator(ref: str, options: dict | None = None):
    """An instance of the generator named by an entry point or by module:attr."""
    if ":" in ref:
        factory = _load_ref(ref)
    else:
        eps = [ep for ep in entry_points(group=GROUP) if ep.name == ref]
        if not eps:
            known = ", ".join(sorted(registered())) or "none installed"
            raise UserError(f"unknown generator {ref!r}: not registered under the entry-point group "
                            f"{GROUP!r} (registered: {known}); or give it as module:attr")
        factory = eps[0].load()
    options = options or {}
    if isinstance(factory, type):
        gen = _construct(ref, factory, options)
    else:
        gen = factory
        if callable(gen) and not hasattr(gen, "generate"):
            gen = _construct(ref, gen, options)
        elif options:
            raise UserError(f"generator {ref!r} takes no options (it is an instance, not a "
                            f"class or factory); drop -o {', '.join(sorted(options))}")
    for attr in ("name", "version", "generate"):
        if not hasattr(gen, attr):
            raise UserError(f"generator {ref!r} has no `{attr}`: a generator needs name, version "
                            "and generate(ctx) (see docs/generators.md)")
    return gen


def _construct(ref: str, factory, options: dict):
    """Call a generator's class or factory with the -o options, which must match its
    signature: an option it does not take is an error naming the ones it does."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        try:
            sig.bind(**options)
        except TypeError as exc:
            takes = [n for n, p in sig.parameters.items()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            unknown = sorted(set(options) - set(takes))
            if unknown and not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
                raise UserError(f"generator {ref!r} does not take option(s) {', '.join(unknown)}; "
                                f"it takes: {', '.join(takes) or 'no options'}") from None
            raise UserError(f"generator {ref!r} cannot be made from these options ({exc}); "
                            f"it takes: {', '.join(takes) or 'no options'}") from None
    return factory(**options)


def code_identity(gen) -> dict:
    """What names a generator's code in a run and a bundle: its module, the sha256 of that
    module's file, and the distribution (name and version) that installed it, if any."""
    import hashlib
    import sys
    from importlib.metadata import packages_distributions, version

    module = getattr(type(gen), "__module__", None) if not isinstance(gen, type) else gen.__module__
    if module in (None, "builtins"):
        module = getattr(gen, "__module__", None)
    out: dict = {"module": module}
    mod = sys.modules.get(module or "")
    path = getattr(mod, "__file__", None)
    if path:
        try:
            with open(path, "rb") as fh:
                out["sha256"] = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            pass
    top = (module or "").split(".")[0]
    dists = packages_distributions().get(top, [])
    if dists:
        out["distribution"] = f"{dists[0]} {version(dists[0])}"
    return out
