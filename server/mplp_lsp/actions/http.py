"""External calls: HTTP requests (``http`` actions) and OpenAI-compatible chat (``llm``).

Both use aiohttp with a total timeout. A status of 400 or more is a failure
(``http_error``). Bodies are read up to a cap; URLs are reported without credentials. The LLM
key is read from the file the ``llmApiKeyFile`` setting names, at call time, and goes only
into the ``Authorization`` header: never into an event, a result or a log line.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from mplp_lsp.actions.executor import ActionError, Handled
from mplp_lsp.actions.kinds import HttpAction, LlmAction
from mplp_lsp.protocol.result import ErrorCode
from mplp_lsp.sanitize.redact import strip_url_credentials

_BODY_CAP = 1 << 20


async def _request(
    method: str, url: str, timeout_s: float, *, headers: dict[str, str], json_body: Any
) -> tuple[int, str, bytes]:
    shown = strip_url_credentials(url)
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.request(method, url, headers=headers, json=json_body) as response,
        ):
            body = await response.content.read(_BODY_CAP)
            return response.status, response.content_type, body
    except TimeoutError:
        raise ActionError.single(
            ErrorCode.ACTION_TIMEOUT, f"{method} {shown} timed out after {timeout_s:g} s"
        ) from None
    except aiohttp.ClientError as exc:
        raise ActionError.single(ErrorCode.HTTP_ERROR, f"{method} {shown}: {exc}") from None


async def http_call(action: HttpAction) -> Handled:
    status, content_type, body = await _request(
        action.method,
        action.url,
        action.timeout_s,
        headers=action.headers,
        json_body=action.json_body,
    )
    if status >= 400:
        raise ActionError.single(
            ErrorCode.HTTP_ERROR, f"{action.method} {strip_url_credentials(action.url)}: {status}"
        )
    output: dict[str, Any] = {"status": status}
    if content_type == "application/json":
        try:
            output["json"] = json.loads(body)
        except ValueError:
            output["text"] = body.decode("utf-8", "replace")
    else:
        output["text"] = body.decode("utf-8", "replace")
    return Handled(output=output)


@dataclass(frozen=True)
class LlmConfig:
    endpoint: str | None  # base URL; requests go to <endpoint>/chat/completions
    model: str | None
    api_key_file: Path | None


class LlmHandler:
    def __init__(self, config: LlmConfig) -> None:
        self.config = config

    async def __call__(self, action: LlmAction) -> Handled:
        config = self.config
        model = action.model or config.model
        if not config.endpoint or not model:
            raise ActionError.single(
                ErrorCode.LLM_NOT_CONFIGURED, "set llmEndpointUrl and llmModel to run llm actions"
            )
        headers = {}
        if config.api_key_file is not None:
            key = await asyncio.to_thread(_read_key, config.api_key_file)
            headers["Authorization"] = f"Bearer {key}"
        body: dict[str, Any] = {
            "model": model,
            "messages": [m.model_dump() for m in action.messages],
        }
        if action.temperature is not None:
            body["temperature"] = action.temperature
        url = config.endpoint.rstrip("/") + "/chat/completions"
        status, _type, raw = await _request(
            "POST", url, action.timeout_s, headers=headers, json_body=body
        )
        if status >= 400:
            raise ActionError.single(
                ErrorCode.HTTP_ERROR, f"POST {strip_url_credentials(url)}: {status}"
            )
        try:
            reply = json.loads(raw)
            content = reply["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ActionError.single(
                ErrorCode.LLM_BAD_RESPONSE, "the endpoint's reply has no choices[0].message"
            ) from None
        output: dict[str, Any] = {"content": content, "model": reply.get("model", model)}
        if isinstance(reply.get("usage"), dict):
            output["usage"] = reply["usage"]
        return Handled(output=output)


def _read_key(path: Path) -> str:
    try:
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ActionError.single(
            ErrorCode.LLM_NOT_CONFIGURED, f"cannot read the API key file: {exc.strerror}"
        ) from None
    if not key:
        raise ActionError.single(ErrorCode.LLM_NOT_CONFIGURED, "the API key file is empty")
    return key
