"""The gate's table: what ``conli check`` and ``conli batch`` pass and exit with, row by row.

The gate tests run every row; the docs test holds docs/cli.md's table equal to it.
"""

from __future__ import annotations

# (verdict, threshold, --fail-on) -> (passed, exit code of `conli check` and `conli batch`)
GATE_TABLE: list[tuple[str, str, str, bool, int]] = [
    ("supported", "none", "none", True, 0),
    ("supported", "none", "hallucinated", True, 0),
    ("supported", "none", "unverified", True, 0),
    ("supported", "0.4", "none", True, 0),
    ("supported", "0.4", "hallucinated", True, 0),
    ("supported", "0.4", "unverified", True, 0),
    ("supported", "0.9", "none", False, 0),
    ("supported", "0.9", "hallucinated", False, 4),
    ("supported", "0.9", "unverified", False, 4),
    ("hallucinated", "none", "none", False, 0),
    ("hallucinated", "none", "hallucinated", False, 4),
    ("hallucinated", "none", "unverified", False, 4),
    ("hallucinated", "0.4", "none", False, 0),           # passed yes before issue 45
    ("hallucinated", "0.4", "hallucinated", False, 4),   # exit 0 before issue 45
    ("hallucinated", "0.4", "unverified", False, 4),     # exit 0 before issue 45
    ("hallucinated", "0.9", "none", False, 0),
    ("hallucinated", "0.9", "hallucinated", False, 4),
    ("hallucinated", "0.9", "unverified", False, 4),
    ("unverified", "none", "none", False, 0),
    ("unverified", "none", "hallucinated", False, 0),
    ("unverified", "none", "unverified", False, 4),
    ("unverified", "0.4", "none", False, 0),
    ("unverified", "0.4", "hallucinated", False, 0),
    ("unverified", "0.4", "unverified", False, 4),
    ("unverified", "0.9", "none", False, 0),
    ("unverified", "0.9", "hallucinated", False, 0),
    ("unverified", "0.9", "unverified", False, 4),
]
