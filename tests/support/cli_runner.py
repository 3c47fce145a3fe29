"""Run the conli CLI with the test-only ``fake`` backend and ``scored`` detector registered.

For subprocess tests: ``python -m tests.support.cli_runner check ... --llm fake --detector scored``.
"""

import os
import sys

os.environ.setdefault("CONLI_TEST_FAKE", "1")
import tests.support.score_detector  # registers the scored detector
import tests.support.scripted  # noqa: F401 - registers the fake backend
from conli.cli.app import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
