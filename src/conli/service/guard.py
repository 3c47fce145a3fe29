"""The service's gate: the API key (or loopback in open mode) on /v1, and the body-size limit.

An ASGI middleware that runs before any body parsing, so an unauthenticated client learns
nothing and an oversized body is refused without being held in memory. In open mode (no
keys) it also refuses what a web page could send: a ``Host`` that is not this loopback
address (DNS rebinding) and a browser request from another origin.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conli.errors import InputTooLargeError
from conli.service.problems import openai_error, problem_response

API_KEY_HEADER = "X-API-Key"
STREAM_PATH = "/v1/check/stream"
_OPENAI_KINDS = {401: "authentication_error", 403: "permission_error"}


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is this machine only."""
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class Guard:
    """ASGI middleware: API key (or loopback in open mode) on /v1, and the body-size limit."""

    def __init__(self, app: ASGIApp, *, keys: list[str], open_access: bool,
                 max_body: int, bind_host: str | None = None, bearer: bool = False,
                 openai_paths: frozenset[str] = frozenset()) -> None:
        """With ``bearer`` a key may come as ``Authorization: Bearer`` too.

        ``openai_paths`` (the proxy's routes) are refused in OpenAI's error shape.
        """
        self.app, self.keys, self.open_access, self.max_body = app, keys, open_access, max_body
        self.bind_host, self.bearer, self.openai_paths = bind_host, bearer, openai_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse, or pass the request on with its body counted (or read and replayed)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if scope["path"] == STREAM_PATH:  # read by the route as it arrives, counted here
            await self.app(scope, self._capped(receive), send)
            return
        body, refusal = await self._read_body(scope, receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _refusal(self, scope: Scope) -> JSONResponse | None:
        path = scope["path"]
        if self.open_access and (why := self._web_page(scope)) is not None:
            return self._refuse(403, "forbidden", "refused in open mode", why, path)
        if path.startswith("/v1/"):
            if self.open_access and not is_loopback((scope.get("client") or (None,))[0]):
                return self._refuse(403, "forbidden", "open mode serves loopback only", "", path)
            if self.keys:
                given = self._key(dict(scope["headers"]))
                if not given or not any(
                    hmac.compare_digest(given, key.encode()) for key in self.keys
                ):
                    where = f"the {API_KEY_HEADER} header" + (
                        " or as the bearer token" if self.bearer else "")
                    return self._refuse(401, "unauthorized", "missing or wrong API key",
                                        f"send a valid key in {where}", path)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if not length.isdigit():
                return self._refuse(400, "bad-request", "invalid Content-Length", "", path)
            if int(length) > self.max_body:
                return self._too_large(path)
        return None

    def _key(self, headers: dict[bytes, bytes]) -> bytes | None:
        """The key given: ``X-API-Key``, else (where allowed) the bearer token."""
        given = headers.get(API_KEY_HEADER.lower().encode())
        if given is None and self.bearer:
            scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
            given = token.strip() if scheme.lower() == b"bearer" else None
        return given

    def _refuse(self, status: int, slug: str, title: str, detail: str,
                path: str) -> JSONResponse:
        if path in self.openai_paths:
            return openai_error(status, f"{title}: {detail}" if detail else title, code=slug,
                                kind=_OPENAI_KINDS.get(status, "invalid_request_error"))
        return problem_response(status, slug, title, detail, instance=path)

    def _web_page(self, scope: Scope) -> str | None:
        """Why a request may come from a web page rather than a local client (None: it does not).

        Open mode has no key, so only the loopback address and a same-origin page pass:
        a rebound DNS name gives a foreign ``Host``, a cross-site form or ``fetch`` an
        ``Origin`` (or ``Sec-Fetch-Site``) naming another site.
        """
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        name = urlsplit(f"//{host}").hostname
        if not name or not (is_loopback(name) or name == self.bind_host):
            return f"the Host {host!r} is not this service's loopback address"
        origin = headers.get(b"origin")
        if origin is not None and urlsplit(origin.decode("latin-1")).netloc != host:
            return "a browser request from another origin (open mode has no key to check)"
        site = headers.get(b"sec-fetch-site", b"").decode("latin-1")
        if site in ("cross-site", "same-site"):
            return "a browser request from another site (open mode has no key to check)"
        return None

    async def _read_body(self, scope: Scope, receive: Receive) -> tuple[bytes, JSONResponse | None]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", self._too_large(scope["path"])
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks), None

    def _capped(self, receive: Receive) -> Receive:
        """``receive`` that fails (413) once the body passes the limit."""
        size = 0

        async def capped() -> Message:
            nonlocal size
            message = await receive()
            size += len(message.get("body", b"")) if message["type"] == "http.request" else 0
            if size > self.max_body:
                raise InputTooLargeError(f"the request body is over the limit of "
                                         f"{self.max_body:,} bytes")
            return message

        return capped

    def _too_large(self, path: str) -> JSONResponse:
        return self._refuse(413, "too-large", "request body too large",
                            f"the limit is {self.max_body:,} bytes", path)
