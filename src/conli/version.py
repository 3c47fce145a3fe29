"""conli's version, in a module of its own so that any layer can name it without a circle.

``conli.__version__`` is this; importing the package root from inside it would import every
front door. ``source_commit`` names the git commit conli runs from, for audit records.
"""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

__version__ = "0.1.0"


@lru_cache(maxsize=1)
def source_commit() -> str | None:
    """The commit of the checkout conli runs from (``+dirty`` with local changes), else None.

    An installed wheel has no checkout, so its records name the version alone. Asked once
    a process; git missing or slow is the same as no checkout.
    """
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", "."],
                                capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if status.strip() else head or None


def renamed(module: str, old: str, new: type) -> Callable[[str], Any]:
    """A module's ``__getattr__`` that still answers ``old``, ``new``'s former name.

    It gives ``new`` with a ``DeprecationWarning`` naming both; any other missing name is
    the usual ``AttributeError``.
    """

    def __getattr__(name: str) -> Any:
        if name == old:
            warnings.warn(f"{module}.{old} is deprecated: use {new.__name__} (the same class)",
                          DeprecationWarning, stacklevel=2)
            return new
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
