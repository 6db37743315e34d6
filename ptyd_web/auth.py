"""Who may see the dashboard: a process of this user (the peer-uid check of a loopback port; a Unix socket is
0600) that shows the daemon's operator token, once in the URL printed at start, then as a cookie derived from it.
The token printed at start stays good for this server's life: a restarted daemon mints a new operator token, and
the printed URL, and the browsers' cookies, must not stop working with it (the daemon's current token works too).
A Host header that is not this server's own is refused too, so a web page elsewhere cannot reach it through a
DNS name rebound to 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import final

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ptyd_client.errors import DaemonUnavailable

COOKIE = "ptyd_web"
LOGIN_PAGE = """<!doctype html><meta charset="utf-8"><title>ptyd</title>
<body style="font-family: sans-serif; max-width: 40em; margin: 4em auto">
<h1>ptyd dashboard</h1><p>{reason}</p>
<p>Open the URL <code>ptyd web</code> printed when it started (it carries the token), or give the daemon's
operator token (<code>ptyd operator-token</code>):</p>
<form method="get" action="/"><input name="token" type="password" size="60" autofocus> <button>Open</button></form>
"""


def cookie_value(token: str) -> str:
    """What the cookie holds: proof of the token, not the token itself."""
    return hmac.new(token.encode(), b"ptyd web cookie", hashlib.sha256).hexdigest()


@final
class TokenRequired:
    """ASGI middleware: an HTTP request needs the operator token (query ``token``) or the cookie it set."""

    def __init__(
        self, app: ASGIApp, token: Callable[[], str], hosts: frozenset[str] | None, printed: str | None = None
    ) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts  # the Host headers this server answers to (None: any, on a Unix socket)
        self.printed = printed  # the token in the URL printed at start (None: the daemon's current one alone)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        response = self._refusal(Request(scope))
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)

    def _tokens(self) -> tuple[list[str], DaemonUnavailable | None]:
        """The tokens that open the page: the printed one, and the daemon's current one while it runs."""
        tokens = [self.printed] if self.printed else []
        try:
            current = self.token()
        except DaemonUnavailable as exc:
            return tokens, exc
        return (tokens if current in tokens else [*tokens, current]), None

    def _refusal(self, request: Request) -> Response | None:
        if self.hosts is not None and request.headers.get("host", "") not in self.hosts:
            return PlainTextResponse("ptyd web answers only to its own address\n", status_code=403)
        tokens, down = self._tokens()
        if not tokens:
            return PlainTextResponse(f"the daemon is not running: {down}\n", status_code=503)
        given = request.query_params.get("token")
        if given is not None:
            if not any(hmac.compare_digest(given.encode(), t.encode()) for t in tokens):
                return _login("That token is not the daemon's operator token.", 401)
            # The token leaves the address bar: the cookie carries the proof from here on, of the printed token
            # when there is one (it outlives the daemon's).
            target = URL(str(request.url)).remove_query_params("token")
            redirect = RedirectResponse(target.path + (f"?{target.query}" if target.query else ""), status_code=303)
            redirect.set_cookie(COOKIE, cookie_value(tokens[0]), httponly=True, samesite="strict", path="/")
            return redirect
        cookie = request.cookies.get(COOKIE, "")
        if not any(hmac.compare_digest(cookie.encode(), cookie_value(t).encode()) for t in tokens):
            return _login("This page needs the daemon's operator token.", 401)
        return None


def _login(reason: str, status: int) -> Response:
    return HTMLResponse(LOGIN_PAGE.format(reason=reason), status_code=status)
