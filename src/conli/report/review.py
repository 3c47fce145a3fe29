"""What an auditor works through in the report: which records need a look, and the marks.

``attention`` says why a record needs a human (failed, flagged, not passed, marked for review
by the judge, emptied by the rewrite), so the page can open with an index of those records.
``review_rows`` lists each checked sentence with the verdict the auditor marks right or
wrong; the page's script (``pages.js`` and ``review.js``, allowed by its hash in the
Content-Security-Policy and nothing else) keeps the marks in the browser's ``localStorage``
and turns them into a JSON Lines file that ``conli calibrate`` reads as it is: one example
per marked sentence (and per record whose verdict was approved or rejected), ``label`` true
when the auditor's answer is "hallucinated" (a flag marked right, or a pass marked wrong).
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from conli.models import FLAGGED

Record = dict[str, Any]
_SCRIPTS = [Path(__file__).parent / "templates" / name for name in ("pages.js", "review.js")]


@cache
def script() -> str:
    """The page's one script, as it inlines it: the index's paging (``pages.js``), the marks."""
    return "\n".join(path.read_text(encoding="utf-8") for path in _SCRIPTS)


def script_hash() -> str:
    """The script's CSP source (``'sha256-…'``): the one script the page may run."""
    digest = hashlib.sha256(script().encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def judge_items(result: Record) -> list[tuple[str, Record]]:
    """The judge results a record holds, by key (judge mode's one, or before and after)."""
    return [(key, result[key]) for key in ("judge", "judge_raw", "judge_refined")
            if isinstance(result.get(key), dict)]


def judges(result: Record) -> list[Record]:
    """The judge results a record holds, in ``judge_items``' order."""
    return [judge for _, judge in judge_items(result)]


def sentences_of(result: Record) -> list[Record]:
    """The checked sentences: a check's own, or the judge audit's in judge mode."""
    if isinstance(result.get("sentences"), list):
        return [s for s in result["sentences"] if isinstance(s, dict)]
    for judged in judges(result):
        audit = judged.get("audit")
        if isinstance(audit, dict) and isinstance(audit.get("sentences"), list):
            return [s for s in audit["sentences"] if isinstance(s, dict)]
    return []


def attention(record: Record, verdict: str) -> list[str]:
    """Why a human should look at this record; empty when nothing calls for it."""
    if verdict == "error":
        return ["failed"]
    result = record.get("result") or {}
    why = [verdict] if verdict in FLAGGED else []
    if result.get("passed") is False and not why:  # a flagged result never passes anyway
        why.append("not passed")
    for judged in judges(result):
        why += [f"review: {reason}" for reason in judged.get("review") or []]
        if judged.get("status") == "emptied":
            why.append("emptied by the rewrite")
    why += [f"source chunk {n['source']} speaks to the checker" for n in addressed_notes(result)]
    return list(dict.fromkeys(why))


def addressed_notes(result: Record) -> list[Record]:
    """The result's notes naming a source (chunk) that holds text addressed to the checker."""
    notes = result.get("notes")
    return [n for n in notes if isinstance(n, dict) and n.get("kind") == "addressed"
            and isinstance(n.get("source"), int)] if isinstance(notes, list) else []


def review_rows(result: Record) -> list[Record]:
    """Each checked sentence as the auditor marks it: index, text, verdict, flagged or not."""
    return [{"index": int(s.get("index", i)), "text": str(s.get("text", "")),
             "verdict": str(s["verdict"]), "flagged": s["verdict"] in FLAGGED}
            for i, s in enumerate(sentences_of(result))
            if s.get("checked", True) and isinstance(s.get("verdict"), str)]


def provenance(result: Record) -> list[tuple[str, str]]:
    """What made the verdicts and score: the judge's audit record, else the check's own.

    The last judge's (after the rewrite) where there were two; without a judge, what the
    check result carries (``check_provenance``).
    """
    for judged in reversed(judges(result)):
        audit = judged.get("audit")
        if not isinstance(audit, dict):
            continue
        artifacts = audit.get("artifacts") or {}
        rows = [("judge mode", str(judged.get("mode", ""))),
                ("template", str(audit.get("template", ""))),
                ("detectors", ", ".join(str(d) for d in audit.get("detectors") or [])),
                ("artifacts", ", ".join(f"{k}: {v}" for k, v in sorted(artifacts.items()))),
                ("NLI prompt", str(audit.get("nli_prompt") or "")),
                ("backend", f"{audit.get('backend', '')} ({audit.get('model', '')})"),
                ("conli", f"{audit.get('conli_version', '')} "
                          f"{audit.get('commit') or ''}".strip()),
                ("judged at", str(audit.get("judged_at", "")))]
        return [(name, value) for name, value in rows if value]
    return check_provenance(result)


def check_provenance(result: Record) -> list[tuple[str, str]]:
    """What a check result says made its verdicts: backend, detectors, prompts, version."""
    detectors = sorted({str(j["detector"]) for s in result.get("sentences") or []
                        for j in s.get("judgements") or [] if j.get("detector")})
    calibration = result.get("calibration") or {}
    rows = [("backend", f"{result['backend']} ({result.get('model', '')})"
             if result.get("backend") else ""),
            ("detectors", ", ".join(detectors)),
            ("templates", ", ".join(str(t) for t in result.get("templates") or [])),
            ("calibration", f"{calibration.get('file', '')} (sha256 "
                            f"{str(calibration.get('sha256', ''))[:12]})" if calibration else ""),
            ("result schema", str(result.get("schema_version") or "")),
            ("conli", f"{result.get('conli_version') or ''} "
                      f"{result.get('commit') or ''}".strip())]
    return [(name, value) for name, value in rows if value]
