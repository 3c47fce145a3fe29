"""Where things are, wherever a test file sits: the checkout's root and the tests' folder."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/support/paths.py -> the checkout
TESTS = ROOT / "tests"  # fixtures/ and golden/ hold the tests' data files
