"""A text with no sentence to check (headings only) is unscored in every judge mode (62.3).

``conli batch --mode judge`` gave every such record "score 5" while ``conli check`` on the
same text says ``unverified``: no judge scores a text nothing was checked in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conli.cli.app import main

SOURCE = "The library opened in 1962. It lends books free of charge."
HEADINGS = ["# Summary\n\n## Details", "## Opening", "### Notes\n\n#### More"]


pytestmark = pytest.mark.usefixtures("fake")


@pytest.mark.parametrize("mode", ["grounded", "rubric", "both"])
def test_batch_judge_mode_leaves_a_headings_only_text_unscored(
        mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": f"h{i}", "source": SOURCE, "response": text}) + "\n"
                           for i, text in enumerate(HEADINGS)))
    code = main(["batch", str(src), str(out), "--mode", "judge", "--judge-mode", mode,
                 "--llm", "fake", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(HEADINGS) and all(r["ok"] for r in records)
    for record in records:
        judged = record["result"]["judge"]
        assert judged["status"] == "unverified" and judged["score"] is None
        assert "no sentence to check" in judged["error"]
        if mode == "both":
            assert judged["review"] and "no sentence to check" in judged["review"][0]
    assert "score 5" not in err and f"unverified {len(HEADINGS)}" in err
