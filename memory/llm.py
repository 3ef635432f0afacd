"""The chat model behind summaries and extraction: SiliconFlow when a key is configured.

Without a key the maintenance uses its offline summarizer and rule-based extractor
(memory.maintenance), so the three memory layers fill on the embedded default too.
"""

from __future__ import annotations

from functools import cache

import httpx
from django.conf import settings

from memory.remote import http_client, retrying


class LLMError(Exception):
    """The chat model failed or answered nothing usable."""


class _Retryable(LLMError):
    pass


class ChatClient:
    """OpenAI-compatible `POST {base_url}/chat/completions`, with timeouts and backoff."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        attempts: int = 3,
        backoff_seconds: float = 1.0,
        timeout_seconds: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        self._retrying = retrying(
            attempts=attempts, backoff_seconds=backoff_seconds, retryable=_Retryable
        )
        self._client = http_client(
            base_url=base_url, api_key=api_key, timeout_seconds=timeout_seconds, transport=transport
        )

    def complete(self, prompt: str, *, max_tokens: int = 512) -> str:
        """The model's answer to one user prompt (temperature 0: summaries should be stable)."""
        return self._retrying(self._complete, prompt, max_tokens)

    def _complete(self, prompt: str, max_tokens: int) -> str:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        try:
            response = self._client.post("/chat/completions", json=body)
        except httpx.TransportError as exc:  # timeouts included
            raise _Retryable(f"chat model unreachable: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(f"chat model answered {response.status_code}")
        if response.status_code != 200:
            raise LLMError(f"chat model answered {response.status_code}: {response.text[:200]}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"malformed chat response ({exc})") from exc
        if not isinstance(content, str) or not content.strip():
            raise LLMError("the chat model answered nothing")
        return content.strip()


@cache
def configured_chat() -> ChatClient | None:
    """SiliconFlow's chat model when an API key is configured, else None (offline)."""
    config = settings.ORCA
    if not config.siliconflow_api_key:
        return None
    return ChatClient(
        base_url=config.siliconflow_base_url,
        api_key=config.siliconflow_api_key,
        model=config.siliconflow_chat_model,
    )
