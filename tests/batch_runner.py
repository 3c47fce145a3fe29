"""Run the conli CLI with the test-only ``fake`` backend registered (for subprocess tests)."""

import os
import sys

os.environ.setdefault("CONLI_TEST_FAKE", "1")
import tests.scripted  # noqa: F401 - registers the fake backend
from conli.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
