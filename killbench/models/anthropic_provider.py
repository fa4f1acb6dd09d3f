"""``anthropic/MODEL``: the official ``anthropic`` SDK and its Messages API.

Chat only: the Messages API has no raw-prompt endpoint, so completion mode is a
``UserError``. System messages are lifted into the ``system`` parameter (the API takes
no system role in ``messages``). Input tokens are counted as the API bills them:
``input_tokens`` plus any prompt-cache creation and read tokens.

Temperature: API version 2026-10-21, which the anthropic SDK 2.x sends by default,
rejects sampling parameters and that SDK no longer accepts them, so temperature is not
sent with such an SDK and the transcript says so (``sent.not_sent``). It stays in the
request key: it is what the generator asked for. Older SDKs (API 2023-06-01) get it.
"""

from __future__ import annotations

import inspect
import os

from ..errors import UserError
from .base import ClientSettings, ModelClient, ModelError, Reply, http_error

ANTHROPIC_URL = "https://api.anthropic.com"


class AnthropicClient(ModelClient):
    modes = frozenset({"chat"})

    def __init__(self, settings: ClientSettings, api_key: str):
        super().__init__(settings)
        import anthropic  # imported here: slow to import, and only this provider needs it

        self.sdk = f"anthropic {anthropic.__version__}"
        self._anthropic = anthropic
        self._client = anthropic.Anthropic(api_key=api_key, base_url=settings.base_url,
                                           max_retries=settings.max_retries,
                                           timeout=settings.timeout_s)
        create = self._client.messages.create
        self._takes_temperature = "temperature" in inspect.signature(create).parameters

    def close(self) -> None:
        self._client.close()

    def _send(self, request: dict, key: str) -> Reply:
        system = [m["content"] for m in request["messages"] if m["role"] == "system"]
        params: dict = {
            "model": request["model"],
            "max_tokens": request["max_tokens"],
            "messages": [m for m in request["messages"] if m["role"] != "system"],
        }
        if system:
            params["system"] = "\n\n".join(system)
        if request["stop"] is not None:
            params["stop_sequences"] = request["stop"]
        not_sent = {}
        if self._takes_temperature:
            params["temperature"] = request["temperature"]
        else:
            not_sent["temperature"] = (f"{self.sdk} (API version 2026-10-21 and later) does "
                                       "not accept sampling parameters")
        try:
            resp = self._client.messages.create(**params)
        except self._anthropic.APIStatusError as exc:
            raise http_error(self.name, exc.status_code, exc.message,
                             self.settings.max_retries, key) from exc
        except self._anthropic.APIError as exc:
            raise ModelError(
                f"{self.name}: {type(exc).__name__}: {exc} (after up to "
                f"{self.settings.max_retries} retries by the anthropic SDK; base URL "
                f"{self.settings.base_url or ANTHROPIC_URL})",
                status=None, request_hash=key) from exc

        text = "".join(getattr(block, "text", "") for block in (resp.content or [])
                       if getattr(block, "type", None) == "text")
        usage = getattr(resp, "usage", None)
        input_tokens = output_tokens = raw = None
        if usage is not None and getattr(usage, "input_tokens", None) is not None \
                and getattr(usage, "output_tokens", None) is not None:
            raw = usage.model_dump(exclude_none=True)
            input_tokens = (usage.input_tokens + (usage.cache_creation_input_tokens or 0)
                            + (usage.cache_read_input_tokens or 0))
            output_tokens = usage.output_tokens
        sent = {"endpoint": "messages", **{k: v for k, v in params.items() if k != "messages"}}
        if not_sent:
            sent["not_sent"] = not_sent
        return Reply(text=text, input_tokens=input_tokens, output_tokens=output_tokens,
                     finish_reason=getattr(resp, "stop_reason", None),
                     model=getattr(resp, "model", None) or request["model"], sent=sent,
                     raw_usage=raw)


def open_anthropic(settings: ClientSettings) -> ModelClient:
    """``anthropic/MODEL``: ANTHROPIC_API_KEY is required unless a base URL names another server."""
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        if not settings.base_url:
            raise UserError(
                f"anthropic/{settings.model} needs an API key: set ANTHROPIC_API_KEY (or "
                "use --base-url for a server that speaks the Messages API, e.g. llama-server)")
        key = "no-key-needed"
    return AnthropicClient(settings, key)
