"""The command line, ``conli``: one module a subcommand, each loaded only when it runs.

The console script (``conli.cli.app:main``) and ``python -m conli.cli`` run the parser and
the dispatch in ``conli.cli.app``; ``main`` here is the same, for code that imports it.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the ``conli`` command line with ``argv`` (default: ``sys.argv[1:]``)."""
    from conli.cli.app import main as run

    return run(argv)
