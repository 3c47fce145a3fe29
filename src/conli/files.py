"""Write a whole file or nothing: a temp file in the target's folder, renamed into place.

Readers (and a crash mid-write) never see a torn file, and concurrent writers of the
same path each leave a complete one. Used by every command that writes output.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


@contextmanager
def atomic_writer(path: Path, *, mode: int = 0o644) -> Iterator[TextIO]:
    """Yield a text handle; on success the file appears at ``path`` with ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:32]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
        os.chmod(tmp, mode)  # mkstemp makes it 0600; outputs are meant to be read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole, or leave ``path`` as it was."""
    with atomic_writer(path) as handle:
        handle.write(text)
