"""From a model name (``provider/model``) to a ready client.

Providers are a plain dict from provider name to factory, so adding one (the
llama.cpp-backed ``local`` provider, a user's own gateway) is one registration and no
change here: call ``register_provider`` at import time, or publish the factory under
the entry point group ``killbench.model_providers`` (name = provider) and it is found
on first use. A factory takes a ``ClientSettings`` and returns a ``ModelClient``; it
raises ``UserError`` for anything the user must fix (a missing key, a missing URL).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

from ..errors import UserError
from .base import DEFAULT_MAX_RETRIES, ClientSettings, ModelClient
from .budget import Budget
from .cache import ChainCache, ResponseCache, TranscriptCache
from .transcript import Transcript

ProviderFactory = Callable[[ClientSettings], ModelClient]
ENTRY_POINT_GROUP = "killbench.model_providers"
EXAMPLES = ("openai/gpt-4.1, anthropic/claude-sonnet-4-5, openai-compatible/NAME with "
            "--base-url URL, replay/RUN_DIR, local/gemma3-270m")

# provider -> environment variable read when no base URL is given (after KILLBENCH_BASE_URL)
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
# providers that talk to no server: a base URL and the response cache mean nothing to them
NO_SERVER = {"replay"}
# providers that run their own server: a base URL means nothing to them, the cache does
OWN_SERVER = {"local"}


def _openai(settings: ClientSettings) -> ModelClient:
    from .openai_provider import open_openai
    return open_openai(settings)


def _openai_compatible(settings: ClientSettings) -> ModelClient:
    from .openai_provider import open_openai_compatible
    return open_openai_compatible(settings)


def _anthropic(settings: ClientSettings) -> ModelClient:
    from .anthropic_provider import open_anthropic
    return open_anthropic(settings)


def _replay(settings: ClientSettings) -> ModelClient:
    from .replay import open_replay
    return open_replay(settings)


def _local(settings: ClientSettings) -> ModelClient:
    from .local import open_local  # the `local` extra is checked there, not at import
    return open_local(settings)


PROVIDERS: dict[str, ProviderFactory] = {
    "openai": _openai,
    "openai-compatible": _openai_compatible,
    "anthropic": _anthropic,
    "replay": _replay,
    "local": _local,  # llama.cpp run by killbench on loopback: the `local` extra
}

# provider names with a fixed meaning whose factory may be missing from a build
RESERVED: dict[str, str] = {}


def register_provider(name: str, factory: ProviderFactory, *,
                      replace_existing: bool = False) -> None:
    """Make ``name/MODEL`` open through ``factory``."""
    if "/" in name or not name:
        raise ValueError(f"a provider name has no '/': {name!r}")
    if name in PROVIDERS and not replace_existing:
        raise ValueError(f"provider {name!r} is already registered")
    PROVIDERS[name] = factory


def _find_factory(provider: str) -> ProviderFactory:
    factory = PROVIDERS.get(provider)
    if factory is not None:
        return factory
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=provider):
        factory = ep.load()
        PROVIDERS[provider] = factory
        return factory
    if provider in RESERVED:
        raise UserError(RESERVED[provider])
    known = sorted(PROVIDERS)
    raise UserError(f"unknown model provider {provider!r}: use one of {', '.join(known)} "
                    f"(e.g. {EXAMPLES})")


def parse_model_name(name: str) -> tuple[str, str]:
    provider, sep, model = (name or "").strip().partition("/")
    if not sep or not provider or not model.strip("/"):
        raise UserError(f"model name {name!r} is not provider/model: use e.g. {EXAMPLES}")
    return provider, model


def open_model(name: str, *, cache_dir: Path | None, transcript: Transcript | None,
               budget: Budget | None, base_url: str | None = None, no_cache: bool = False,
               max_retries: int = DEFAULT_MAX_RETRIES, timeout_s: float = 600.0,
               resume_from: Path | None = None) -> ModelClient:
    """Open ``provider/model``.

    ``cache_dir=None`` uses the default cache (``responses/`` under the killbench cache
    root); ``no_cache=True`` neither reads nor writes it. The base URL is taken from
    ``base_url``, else KILLBENCH_BASE_URL, else the provider's own variable
    (OPENAI_BASE_URL, ANTHROPIC_BASE_URL). ``resume_from`` is the transcript of the run being
    resumed: what it already answered is served from there first, whatever ``no_cache`` says.
    """
    provider, model = parse_model_name(name)
    factory = _find_factory(provider)
    if provider in NO_SERVER or provider in OWN_SERVER:
        base_url = None
    else:
        env = BASE_URL_ENV.get(provider)
        base_url = (base_url or os.environ.get("KILLBENCH_BASE_URL")
                    or (os.environ.get(env) if env else None) or None)
    cache = None
    if not no_cache and provider not in NO_SERVER:
        if cache_dir is None:
            from ..locations import cache_subdir
            cache_dir = cache_subdir("responses")
        cache = ResponseCache(Path(cache_dir))
    if resume_from is not None and provider not in NO_SERVER and Path(resume_from).exists():
        cache = ChainCache(TranscriptCache(Path(resume_from)), cache)
    settings = ClientSettings(provider=provider, model=model, base_url=base_url, cache=cache,
                              transcript=transcript, budget=budget, max_retries=max_retries,
                              timeout_s=timeout_s)
    client = factory(settings)
    if not isinstance(client, ModelClient):
        raise TypeError(f"the factory for provider {provider!r} returned {type(client)!r}, "
                        "not a ModelClient")
    return client


def check_model(name: str, base_url: str | None = None) -> None:
    """Everything `open_model` would refuse (the name, the provider, a key, a URL, a local
    model's extra), checked before a run creates anything. Opening a client talks to no
    server (the local one starts on the first request), so this is cheap."""
    client = open_model(name, cache_dir=None, transcript=None, budget=None, base_url=base_url,
                        no_cache=True)
    client.close()


__all__ = ["PROVIDERS", "ProviderFactory", "check_model", "open_model", "parse_model_name",
           "register_provider"]
