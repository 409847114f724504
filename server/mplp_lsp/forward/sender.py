"""The aiohttp transport: POST a batch (or a stream report), report the status, never follow
a redirect.

Certificates are verified (aiohttp's default, kept). Redirects are not followed at all, so a
batch and its token never go to another origin; a 3xx is reported as an error and the batch
is retried later. Proxies from the environment are not used (``trust_env=False``): where
the envelopes go is what the settings say, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from mplp_lsp import __version__
from mplp_lsp.forward.batching import Batch
from mplp_lsp.forward.transport import Reply, TransportError

__all__ = ["HttpTransport"]

_DETAIL_LIMIT = 300
_BODY_LIMIT = 65_536


class HttpTransport:
    def __init__(
        self,
        endpoint: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        report_endpoint: str | None = None,
        report_timeout: float = 10.0,
    ) -> None:
        self.endpoint = endpoint
        self.report_endpoint = report_endpoint
        self._report_timeout = aiohttp.ClientTimeout(
            total=report_timeout, sock_connect=min(connect_timeout, report_timeout)
        )
        self._headers = {"User-Agent": f"mplp-lsp/{__version__}"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, headers=self._headers, trust_env=False
            )
        return self._session

    async def send(self, batch: Batch) -> Reply:
        return await self._post(self.endpoint, batch.body, batch.headers)

    async def report(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """A stream report (docs/forwarding.md); small, so a shorter timeout."""
        if self.report_endpoint is None:
            return Reply(404, None, "this transport has no report endpoint")
        json_headers = {"Content-Type": "application/json", **headers}
        return await self._post(self.report_endpoint, body, json_headers, self._report_timeout)

    async def _post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        limits: aiohttp.ClientTimeout | None = None,
    ) -> Reply:
        try:
            async with self._client().post(
                url,
                data=body,
                headers=dict(headers),
                allow_redirects=False,
                timeout=limits or self._timeout,
            ) as response:
                detail, body = "", b""
                if response.status >= 300:
                    detail = (await response.text(errors="replace"))[:_DETAIL_LIMIT].strip()
                else:
                    # A sink may read its answer (an OTLP partial success); more is not kept.
                    body = await response.content.read(_BODY_LIMIT)
                return Reply(
                    response.status,
                    response.headers.get("Retry-After"),
                    detail,
                    body,
                    response.headers.get("Content-Type", ""),
                )
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            # The message names the error and the host, never the headers (the token).
            unreachable = isinstance(error, aiohttp.ClientConnectorError) and not isinstance(
                error, aiohttp.ClientSSLError
            )
            raise TransportError(_describe(error), unreachable=unreachable) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _describe(error: BaseException) -> str:
    """What went wrong, in words: what failed and where, never a class name."""
    if isinstance(error, TimeoutError | aiohttp.ServerTimeoutError):
        return "no answer in time"
    if isinstance(error, aiohttp.ClientSSLError):
        return f"TLS with {error.host}:{error.port} failed ({_reason(error.os_error)})"
    if isinstance(error, aiohttp.ClientConnectorError):
        return f"cannot connect to {error.host}:{error.port} ({_reason(error.os_error)})"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "the remote closed the connection without an answer"
    if isinstance(error, OSError):
        return _reason(error)
    return (str(error) or "the request failed")[:_DETAIL_LIMIT]


def _reason(error: OSError) -> str:
    # Lower-case as the start of a clause, but an OpenSSL reason code stays as it is: people
    # search for CERTIFICATE_VERIFY_FAILED, not for its lower-case form.
    text = error.strerror or str(error) or "failed"
    return text[:1].lower() + text[1:]
