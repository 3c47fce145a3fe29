"""``conli serve``: the HTTP service; FastAPI and uvicorn are imported only when it runs."""

from __future__ import annotations

import argparse
from typing import Any

from conli.cli.flags import add_session_flags, session_settings


def add_parser(subparsers: Any) -> None:
    """``conli serve``; the service module (and FastAPI) is imported only when it runs."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="serve /v1/check, /v1/rewrite, /v1/judge over HTTP")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--log-format", choices=["text", "json"], default="text",
                        help="log lines as text or as JSON objects (each with its request_id)")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                        default="info", help="the lowest level logged (default info)")
    add_session_flags(parser)
    parser.add_argument("--upstream", metavar="SPEC",
                        help="also serve OpenAI's POST /v1/chat/completions, forwarding each chat "
                        "to this backend spec and checking its reply (or CONLI_PROXY_UPSTREAM)")
    parser.add_argument("--open", action="store_true",
                        help="serve without API keys; only allowed on a loopback host")
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from conli.service.app import serve

    settings = session_settings(args, proxy_upstream=args.upstream)
    mount = None
    if settings.proxy_upstream is not None:
        from conli.proxy.app import proxy_mount

        mount = proxy_mount(settings)
    return serve(settings, host=args.host, port=args.port, open_access=args.open,
                 log_format=args.log_format, log_level=args.log_level, mount=mount)
