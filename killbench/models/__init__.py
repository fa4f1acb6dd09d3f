"""The model layer a generator uses: a client, a token budget and a transcript.

A generator is handed a ``ModelClient`` (opened by name with ``open_model``) and a
``Budget``; it calls ``client.complete(...)`` and gets a ``ModelResponse``. Everything
that makes model-driven runs comparable and reproducible lives here rather than in each
generator: the shared token ceiling, usage taken from the API, the response cache,
retries through the SDKs, replay from a recorded transcript. Nothing here knows about
mutants. See docs/models.md.
"""

from .base import ClientSettings, ModelClient, ModelError, ModelResponse, Usage, request_key
from .budget import Budget, BudgetExhausted
from .cache import ResponseCache
from .registry import (PROVIDERS, ProviderFactory, check_model, open_model, parse_model_name,
                       register_provider)
from .transcript import TRANSCRIPT_NAME, Transcript

__all__ = [
    "Budget",
    "BudgetExhausted",
    "ClientSettings",
    "ModelClient",
    "ModelError",
    "ModelResponse",
    "PROVIDERS",
    "ProviderFactory",
    "ResponseCache",
    "TRANSCRIPT_NAME",
    "Transcript",
    "Usage",
    "check_model",
    "open_model",
    "parse_model_name",
    "register_provider",
    "request_key",
]
