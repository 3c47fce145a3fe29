"""An installed plug-in for the entry-point tests: a module and the dist-info that declares it."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str,
            group: str, entry: str) -> None:
    """Put ``module`` (its ``source``) on the path with a dist-info naming ``entry`` in ``group``.

    ``entry`` is ``name = module:Attribute``; the distribution is ``module`` with ``-`` for ``_``.
    """
    (tmp_path / f"{module}.py").write_text(source)
    info = tmp_path / f"{module}-0.1.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(f"""\
        [{group}]
        {entry}
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
