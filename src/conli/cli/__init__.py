"""The command line, ``conli``: one module a subcommand, each loaded only when it runs.

``main`` is the console script's entry point (``conli.cli:main``); the parser and the
dispatch live in ``conli.cli.app``.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the ``conli`` command line with ``argv`` (default: ``sys.argv[1:]``)."""
    from conli.cli.app import main as run

    return run(argv)
