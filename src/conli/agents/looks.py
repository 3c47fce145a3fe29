"""Several looks: one claim judged by k chains of thought, and most of them must pass it.

A 1.5B model's single greedy chain is a coin with a bias: a second chain, sampled, often
reasons its way to the other label. With ``nli_looks = k`` the first look is the usual one
(``settings.temperature``, so it replays the single-look call), the other ``k - 1`` are
sampled at ``nli_look_temperature`` with seeds 1 to k - 1. The claim passes only when more
than half of the looks pass it (a tie is not a pass); its score is the mean P(entailment),
for ranking. A look that could not complete leaves the claim ``unverified``: the vote is
never taken on fewer looks.
"""

from __future__ import annotations

from conli.models import Judgement, Look


def look_score(judgement: Judgement) -> float:
    """One look's P(entailment): its label-token score, else its verdict as 0 or 1."""
    if judgement.score is not None:
        return judgement.score
    return 1.0 if judgement.verdict == "supported" else 0.0


def combine_looks(looks: list[Judgement]) -> Judgement:
    """One judgement from every look at the same claim (the first look first).

    Shown label, evidence and reasoning are those of the first look that agrees with the
    vote, so a flag never carries a reason that argues for support; every look is kept
    in ``looks``.
    """
    if not looks:
        raise ValueError("no looks to combine")
    failed = [j for j in looks if j.verdict == "unverified"]
    if failed:
        return failed[0].model_copy(update={
            "error": f"{len(failed)} of {len(looks)} looks could not complete: {failed[0].error}",
        })
    passed = sum(j.verdict == "supported" for j in looks)
    verdict = "supported" if 2 * passed > len(looks) else "hallucinated"
    shown = next(j for j in looks if j.verdict == verdict)
    mean = sum(look_score(j) for j in looks) / len(looks)
    note = f"[{passed} of {len(looks)} looks found entailment; mean P(entailment) {mean:.2f}]"
    return shown.model_copy(update={
        "score": mean,
        "looks": [Look(verdict=j.verdict, score=j.score) for j in looks],
        "reasoning": f"{shown.reasoning} {note}".strip(),
    })
