"""``openai/MODEL`` and ``openai-compatible/MODEL``: the official ``openai`` SDK.

One client class serves OpenAI itself and any server that speaks its API (llama.cpp,
vLLM, Ollama), because the local-model path must exercise the same SDK, HTTP and usage
accounting as a paid model. Rate limits and 5xx are retried by the SDK itself
(``max_retries``); what is still failing after that becomes a ``ModelError``.

The output cap goes out as ``max_completion_tokens`` to OpenAI's own endpoint (its
reasoning models reject ``max_tokens``) and as ``max_tokens`` to any other server
(llama-cpp-python and older servers ignore the newer name, and an ignored cap would
break the budget). Completion mode uses the legacy ``completions`` endpoint, whose cap
is always ``max_tokens``.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from ..errors import UserError
from .base import ClientSettings, ModelClient, ModelError, Reply, http_error, prompt_from_messages

OPENAI_HOST = "api.openai.com"
DUMMY_KEY = "sk-no-key-needed"


def _is_official(base_url: str | None) -> bool:
    return base_url is None or urlsplit(base_url).hostname == OPENAI_HOST


class OpenAIClient(ModelClient):
    modes = frozenset({"chat", "completion"})

    def __init__(self, settings: ClientSettings, api_key: str):
        super().__init__(settings)
        import openai  # imported here: the SDK is slow to import and most runs use one provider

        self.sdk = f"openai {openai.__version__}"
        self._openai = openai
        self._official = _is_official(settings.base_url)
        self._client = openai.OpenAI(api_key=api_key, base_url=settings.base_url,
                                     max_retries=settings.max_retries,
                                     timeout=settings.timeout_s)

    def close(self) -> None:
        self._client.close()

    def _send(self, request: dict, key: str) -> Reply:
        params: dict = {"model": request["model"]}
        if request["stop"] is not None:
            params["stop"] = request["stop"]
        params["temperature"] = request["temperature"]
        if request.get("sampling"):  # llama.cpp's own request fields (repeat_penalty, ...)
            params["extra_body"] = dict(request["sampling"])
        try:
            if request["mode"] == "completion":
                params.update(prompt=prompt_from_messages(request["messages"]),
                              max_tokens=request["max_tokens"])
                resp = self._client.completions.create(**params)
                choice = resp.choices[0] if resp.choices else None
                text = (choice.text if choice else "") or ""
                endpoint = "completions"
            else:
                cap = "max_completion_tokens" if self._official else "max_tokens"
                params.update(messages=request["messages"], **{cap: request["max_tokens"]})
                resp = self._client.chat.completions.create(**params)
                choice = resp.choices[0] if resp.choices else None
                text = (choice.message.content if choice else "") or ""
                endpoint = "chat.completions"
        except self._openai.APIStatusError as exc:
            raise http_error(self.name, exc.status_code, exc.message,
                             self.settings.max_retries, key) from exc
        except self._openai.APIError as exc:  # connection failures, timeouts, bad payloads
            raise ModelError(
                f"{self.name}: {type(exc).__name__}: {exc} (after up to "
                f"{self.settings.max_retries} retries by the openai SDK; base URL "
                f"{self.settings.base_url or 'https://' + OPENAI_HOST})",
                status=None, request_hash=key) from exc

        usage = getattr(resp, "usage", None)
        raw = usage.model_dump(exclude_none=True) if usage is not None else None
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        sent = {"endpoint": endpoint, **{k: v for k, v in params.items()
                                         if k not in ("messages", "prompt")}}
        return Reply(text=text, input_tokens=prompt_tokens, output_tokens=completion_tokens,
                     finish_reason=getattr(choice, "finish_reason", None),
                     model=getattr(resp, "model", None) or request["model"], sent=sent,
                     raw_usage=raw)


def open_openai(settings: ClientSettings) -> ModelClient:
    """``openai/MODEL``: OPENAI_API_KEY is required unless a base URL names another server."""
    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        if _is_official(settings.base_url):
            raise UserError(
                f"{settings.provider}/{settings.model} needs an API key: set OPENAI_API_KEY, "
                "or use --base-url (KILLBENCH_BASE_URL) for an OpenAI-compatible server")
        key = DUMMY_KEY
    return OpenAIClient(settings, key)


def open_openai_compatible(settings: ClientSettings) -> ModelClient:
    """``openai-compatible/MODEL``: any server speaking OpenAI's API; a key is optional.

    The key comes from KILLBENCH_API_KEY, not OPENAI_API_KEY: a user's OpenAI key must
    not be sent to whatever server the base URL names.
    """
    if not settings.base_url:
        raise UserError(
            f"openai-compatible/{settings.model} needs the server's URL: pass --base-url "
            "(or set KILLBENCH_BASE_URL), e.g. http://127.0.0.1:8080/v1")
    return OpenAIClient(settings, os.environ.get("KILLBENCH_API_KEY") or DUMMY_KEY)
