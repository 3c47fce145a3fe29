"""Run the conli CLI with the test-only backends registered (for subprocess tests).

``fake`` answers like a model (``tests.support.scripted``); ``failing`` fails every call as an
overloaded server does (HTTP 503), and appends a line to the file ``--llm failing:FILE``
names for each call, so a test can count the calls a run made; ``garbage`` answers every
call 200, with a web page instead of the JSON asked for (a wrong endpoint); ``nli-garbage``
answers the judges as ``fake`` does but every NLI question with that page, so detection
checks no sentence while a rubric judge would still score.
"""

import os
import sys

os.environ.setdefault("CONLI_TEST_FAKE", "1")
import tests.support.scripted  # registers the fake backend
from conli.backends import register_backend
from conli.backends.base import Backend, Message
from conli.backends.fake import ScriptedBackend
from conli.cli.app import main
from conli.config import Settings
from conli.errors import TransientBackendError


def _failing(arg: str, _settings: Settings) -> Backend:
    def respond(messages: list[Message]) -> TransientBackendError:
        if arg:
            with open(arg, "a", encoding="utf-8") as log:
                log.write("call\n")
        return TransientBackendError("HTTP 503: the server is overloaded")

    concurrency = int(os.environ.get("CONLI_TEST_FAKE_CONCURRENCY", "1"))
    return ScriptedBackend(responder=respond, judges_batches=True, max_concurrency=concurrency)


def _garbage(_arg: str, _settings: Settings) -> Backend:
    return ScriptedBackend(responder=lambda m: "<html><body>Welcome to nginx!</body></html>",
                           judges_batches=True)


def _nli_garbage(_arg: str, _settings: Settings) -> Backend:
    answer = tests.support.scripted.responder()

    def respond(messages: list[Message]) -> str:
        if "<claim id=" in messages[-1]["content"]:
            return "<html><body>Welcome to nginx!</body></html>"
        return answer(messages)

    return ScriptedBackend(responder=respond, judges_batches=True)


register_backend("failing", _failing)
register_backend("nli-garbage", _nli_garbage)
register_backend("garbage", _garbage)

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
