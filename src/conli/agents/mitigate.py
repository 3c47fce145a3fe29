"""The mitigation agent: rewrite or remove only the flagged sentences.

The model returns replacements keyed by sentence id; we splice them into the original by
offsets, so every sentence it was not asked about stays byte-identical by construction.
"""

from __future__ import annotations

from conli.agents.structured import CallRecord, ask_structured, exact_items_schema
from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ContextOverflowError
from conli.models import Mitigation, RewriteAnswer, SentenceChange, SentenceResult
from conli.prompts import render

TEMPLATE = "mitigate.v1"


def mitigate(
    backend: Backend,
    source: str,
    response: str,
    sentences: list[SentenceResult],
    settings: Settings,
) -> tuple[str, Mitigation, list[CallRecord]]:
    """Return the refined text, what changed, and the calls it took."""
    flagged = {s.index: s for s in sentences if s.verdict == "hallucinated"}
    if not flagged:
        return response, Mitigation(status="nothing_flagged"), []
    prompt = render(
        TEMPLATE,
        source=source,
        response=response,
        flagged=[{"id": i, "text": s.text, "reasons": s.reasons} for i, s in flagged.items()],
    )

    def only_flagged_ids(answer: RewriteAnswer) -> None:
        ids = [r.id for r in answer.rewrites]
        if len(set(ids)) != len(ids) or not set(ids) <= set(flagged):
            raise ValueError(f"rewrite ids must be distinct and among {sorted(flagged)}")

    try:
        asked = ask_structured(
            backend,
            prompt.messages,
            RewriteAnswer,
            step="mitigate",
            template=TEMPLATE,
            max_tokens=96 + 160 * len(flagged),
            max_reasks=settings.max_reasks,
            temperature=settings.temperature,
            check=only_flagged_ids,
            schema=exact_items_schema(RewriteAnswer, "rewrites", "RewriteItem", sorted(flagged)),
        )
    except ContextOverflowError as exc:
        return response, Mitigation(status="failed", error=str(exc), template=TEMPLATE), []
    if asked.value is None:
        return response, Mitigation(status="failed", error=asked.error, template=TEMPLATE), asked.calls
    changes = [
        SentenceChange(
            index=r.id,
            action="remove" if r.action == "remove" or not r.text.strip() else "rewrite",
            before=flagged[r.id].text,
            after="" if r.action == "remove" else r.text.strip(),
        )
        for r in asked.value.rewrites
    ]
    changes = [c for c in changes if c.after != c.before]  # a no-op "rewrite" fixed nothing
    refined = apply_changes(response, sentences, changes)
    missing = sorted(set(flagged) - {c.index for c in changes})
    status = "partial" if missing else "rewritten"
    error = f"sentences {missing} are still flagged: no usable rewrite came back" if missing else None
    mitigation = Mitigation(status=status, changes=changes, error=error, template=TEMPLATE)
    return refined, mitigation, asked.calls


def apply_changes(
    response: str, sentences: list[SentenceResult], changes: list[SentenceChange]
) -> str:
    """Splice rewrites into ``response`` by offsets; a removal also drops its trailing gap."""
    by_index = {s.index: s for s in sentences}
    text = response
    for change in sorted(changes, key=lambda c: by_index[c.index].start, reverse=True):
        sentence = by_index[change.index]
        start, end = sentence.start, sentence.end
        if change.action == "remove":
            while end < len(text) and text[end] in " \t":
                end += 1
            if end == len(text) or text[end] == "\n":  # last on its line: eat the gap before
                while start > 0 and text[start - 1] in " \t":
                    start -= 1
        text = text[:start] + change.after + text[end:]
    return text
