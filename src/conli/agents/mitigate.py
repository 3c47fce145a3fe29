"""The mitigation agent: rewrite or remove only the flagged sentences.

The model returns replacements keyed by sentence id; we splice them into the original by
offsets, so every sentence it was not asked about stays byte-identical by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from conli.agents.answers import RewriteAnswer, RewriteItem
from conli.agents.nli import Hypothesis, nli_windows, run_nli
from conli.agents.nli_prompts import laid_out
from conli.agents.structured import CallRecord, ask_structured, exact_items_schema
from conli.backends.base import Backend, primes_prefix
from conli.config import Settings
from conli.errors import ContextOverflowError
from conli.models import Judgement, Mitigation, SentenceChange, SentenceResult
from conli.prompts import render

TEMPLATE = "mitigate.v1"  # its own prompt; SHARED opens as the NLI prompt does
SHARED_TEMPLATE = "mitigate.v2"
Unstated = Callable[[str], list[str]]  # a text's names, numbers, dates the source never states
# judges rewritten sentences (one hypothesis each) as the check's own detector would
Verifier = Callable[[list[Hypothesis]], tuple[list[Judgement], list[CallRecord]]]


def mitigate(
    backend: Backend,
    source: str,
    response: str,
    sentences: list[SentenceResult],
    settings: Settings,
    *,
    question: str | None = None,
    verify: Verifier | None = None,
    unstated: Unstated | None = None,
) -> tuple[str, Mitigation, list[CallRecord]]:
    """Return the refined text, what changed, and the calls it took.

    ``verify`` judges the rewrites (default: NLI on ``backend``, ``verify_rewrites``).
    ``unstated`` names the decisive words of a text the source never states: a rewrite
    with any is not verified, whatever its check said.
    """
    flagged = {s.index: s for s in sentences if s.verdict == "hallucinated"}
    if not flagged:
        return response, Mitigation(status="nothing_flagged"), []
    layout = laid_out(TEMPLATE, SHARED_TEMPLATE, settings, backend.capabilities)
    template = layout.version
    if not layout.shared:  # its own prompt: its rules and worked example from a saved state
        warm_static_prefix(backend)
    prompt = render(
        layout.template,
        source=relevant_source(backend, source, list(flagged.values()), settings),
        response=response,
        flagged=[{"id": i, "text": s.text, "reasons": s.reasons} for i, s in flagged.items()],
        question=question,
        spotlight=layout.spotlight,
        **layout.variables,
    )

    def only_flagged_ids(answer: RewriteAnswer) -> None:
        ids = [r.id for r in answer.rewrites]
        if len(set(ids)) != len(ids) or not set(ids) <= set(flagged):
            ids_asked = ", ".join(str(i) for i in sorted(flagged))  # no [ ]: data defuses them
            raise ValueError(f"rewrite ids must be distinct and among {ids_asked}")

    try:
        asked = ask_structured(
            backend,
            prompt.messages,
            RewriteAnswer,
            step="mitigate",
            template=template,
            max_tokens=96 + 160 * len(flagged),
            max_reasks=settings.max_reasks,
            temperature=settings.temperature,
            check=only_flagged_ids,
            schema=exact_items_schema(RewriteAnswer, "rewrites", "RewriteItem", sorted(flagged)),
        )
    except ContextOverflowError as exc:
        return response, Mitigation(status="failed", error=str(exc), template=template), []
    if asked.value is None:
        return (
            response,
            Mitigation(status="failed", error=asked.error, template=template),
            asked.calls,
        )
    changes = [_change(r, flagged[r.id].text) for r in asked.value.rewrites]
    calls = list(asked.calls)
    if settings.verify_rewrites:
        changes, verify_calls = verify_rewrites(backend, source, changes, settings,
                                                question=question, verify=verify,
                                                unstated=unstated)
        calls += verify_calls
    refined = apply_changes(response, sentences, changes)
    status, error = _outcome(sorted(set(flagged) - {c.index for c in changes}), changes)
    mitigation = Mitigation(status=status, changes=changes, error=error, template=template)
    return refined, mitigation, calls


def warm_static_prefix(backend: Backend) -> float:
    """Ready the rewrite prompt's fixed part (rules, worked example) on a backend that keeps it.

    The embedded backend restores it from disk (saved the first time), so a rewrite
    prefills only the source window, the text and the flagged sentences, not the ~750
    tokens of instructions that never change. Others: nothing to do. Seconds taken.
    """
    primer = primes_prefix(backend)
    if primer is None:
        return 0.0
    return primer.prime(render(TEMPLATE, source="", response="", flagged=[],
                               question=None).messages)


def _outcome(
    missing: list[int], changes: list[SentenceChange]
) -> tuple[Literal["rewritten", "partial"], str | None]:
    """``partial`` when a flag is left in the text or a rewrite could not be verified."""
    problems = []
    if missing:
        problems.append(f"sentences {missing} are still flagged: no usable rewrite came back")
    unverified = [c.index for c in changes if c.rewrite_verdict == "unverified"]
    if unverified:
        kept = [c.index for c in changes if c.rewrite_verdict == "unverified"
                and c.action == "rewrite"]
        problems.append(
            f"the rewrites of sentences {unverified} could not be verified"
            + (f"; {kept} kept unverified" if kept else "; removed instead")
        )
    return ("partial" if problems else "rewritten"), ("; ".join(problems) or None)


def relevant_source(
    backend: Backend, source: str, flagged: list[SentenceResult], settings: Settings
) -> str:
    """The source, or for one too long for the context, the windows that judged the flags.

    Windowed judgements record the window that decided them; the editor sees those
    windows, in source order, joined by an elision mark.
    """
    windows = nli_windows(backend, source, settings)
    if len(windows) == 1:
        return source
    used = sorted({
        j.source_window for s in flagged for j in s.judgements
        if j.verdict != "supported" and j.source_window is not None
    })
    return "\n[...]\n".join(windows[i] for i in used or range(len(windows)))


def _change(item: RewriteItem, before: str) -> SentenceChange:
    """The agent's answer as a change; an empty or unchanged "rewrite" becomes a removal.

    A flagged sentence handed back unchanged still carries its hallucination, and the
    paper's rule for sentences the editor cannot fix is to remove them.
    """
    after = item.text.strip()
    if item.action == "remove" or not after:
        return SentenceChange(index=item.id, action="remove", before=before, after="")
    if after == before.strip():
        return SentenceChange(
            index=item.id,
            action="remove",
            before=before,
            after="",
            note="the editor returned the sentence unchanged",
        )
    return SentenceChange(index=item.id, action="rewrite", before=before, after=after)


def verify_rewrites(
    backend: Backend,
    source: str,
    changes: list[SentenceChange],
    settings: Settings,
    *,
    question: str | None = None,
    verify: Verifier | None = None,
    unstated: Unstated | None = None,
) -> tuple[list[SentenceChange], list[CallRecord]]:
    """Judge each rewrite against the source; one still unsupported is removed instead.

    A small model sometimes "corrects" a sentence by restating the error, or copies its
    neighbours; without this check such a rewrite would pass as a fix. A rewrite whose
    check could not complete is removed too unless ``keep_unverified_rewrites`` is set:
    either way the change says so (``rewrite_verdict`` unverified, with the reason).
    """
    rewrites = [c for c in changes if c.action == "rewrite"]
    hypotheses = [Hypothesis(c.index, c.after) for c in rewrites]
    if verify is not None:
        judged, calls = verify(hypotheses)
    else:
        judged, calls = run_nli(backend, source, hypotheses, kind="sentence",
                                settings=settings, detector="verify_rewrite", question=question)
    by_index = {c.index: j for c, j in zip(rewrites, judged, strict=True)}
    checked = []
    for change in changes:
        judgement = by_index.get(change.index)
        if judgement is not None and judgement.verdict == "supported" and unstated:
            absent = unstated(change.after)
            if absent:
                judgement = judgement.model_copy(update={
                    "verdict": "hallucinated",
                    "reasoning": "the source never states " + ", ".join(absent)})
        if judgement is not None:
            change = _verified(change, judgement, keep_unverified=settings.keep_unverified_rewrites)
        checked.append(change)
    return checked, [replace(c, step="verify_rewrite") for c in calls]


def _verified(
    change: SentenceChange, judgement: Judgement, *, keep_unverified: bool
) -> SentenceChange:
    """The change as its check decided: kept, removed instead, or kept marked unverified."""
    verdict = judgement.verdict
    if verdict == "supported" or (verdict == "unverified" and keep_unverified):
        note = None if verdict == "supported" else (
            f"the rewrite could not be verified ({judgement.error}); kept as asked"
        )
        return change.model_copy(update={"rewrite_verdict": verdict, "note": note})
    reason = (
        "was still unsupported" if verdict == "hallucinated"
        else f"could not be verified ({judgement.error})"
    )
    return change.model_copy(
        update={
            "action": "remove",
            "after": "",
            "rewrite_verdict": verdict,
            "note": f"the proposed rewrite {change.after!r} {reason}; the sentence was removed",
        }
    )


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
