"""The auditor's report both browser tests mark: one batch run of a good and a bad answer."""

from __future__ import annotations

import json
from pathlib import Path

from conli.cli import app as cli

SOURCE = "The library opened in 1921. It holds 40,000 books. The mayor attended the opening."
GOOD = "The library opened in 1921. It holds 40,000 books."
BAD = "The library opened in 1921. It holds 90,000 books."


def batch_report(tmp_path: Path) -> Path:
    """``conli batch`` over 12 records (odd ones BAD), then ``conli report``: the page."""
    records = [{"id": f"a{i}", "source": SOURCE, "response": BAD if i % 2 else GOOD}
               for i in range(12)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert cli.main(["batch", str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"),
                     "--llm", "reading", "--no-progress"]) == 0
    assert cli.main(["report", str(tmp_path / "out.jsonl"), "-o",
                     str(tmp_path / "report.html")]) == 0
    return tmp_path / "report.html"
