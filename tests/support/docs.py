"""The pages the docs tests read: the README and docs/*.md, and their fenced code blocks."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
