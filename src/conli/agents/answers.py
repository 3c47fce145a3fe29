"""What the models answer: the JSON each prompt asks for, validated before anything is used.

Reasoning comes before the label in every schema, so a model writes its evidence first;
bounds live in the fields (lengths, ranges), so a runaway answer is refused, not truncated.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from conli.models import NLILabel


class NLIItem(BaseModel):
    """One hypothesis judged, with the quoted evidence and reasoning before the label."""

    id: int = Field(ge=0)
    evidence: str = Field(max_length=600)
    reasoning: str = Field(max_length=600)
    label: NLILabel


class NLIAnswer(BaseModel):
    """The NLI agent's answer for one batch of numbered hypotheses."""

    judgements: list[NLIItem]


class NLIClaimAnswer(BaseModel):
    """The v3 answer for a one-claim call: v1's item without the batch's id and list."""

    evidence: str = Field(max_length=600)
    reasoning: str = Field(max_length=600)
    label: NLILabel

    @property
    def judgements(self) -> list[NLIItem]:
        """The answer as a one-item batch, so every prompt version is read the same way."""
        return [NLIItem(id=0, evidence=self.evidence, reasoning=self.reasoning, label=self.label)]


class NLIReasonedItem(BaseModel):
    """One hypothesis judged with reasoning before the label, no evidence quote (v2)."""

    id: int = Field(ge=0)
    reasoning: str = Field(max_length=600)
    label: NLILabel


class NLIReasonedAnswer(BaseModel):
    """The v2 NLI answer for one batch."""

    judgements: list[NLIReasonedItem]


class NLILabelOnly(BaseModel):
    """One hypothesis judged without chain of thought (ablation)."""

    id: int = Field(ge=0)
    label: NLILabel


class NLIClaimLabelAnswer(BaseModel):
    """The v3 label-only answer for a one-claim call (ablation)."""

    label: NLILabel

    @property
    def judgements(self) -> list[NLILabelOnly]:
        """The answer as a one-item batch."""
        return [NLILabelOnly(id=0, label=self.label)]


class NLILabelOnlyAnswer(BaseModel):
    """Label-only answer for one batch (ablation)."""

    judgements: list[NLILabelOnly]


class RewriteItem(BaseModel):
    """The mitigation agent's replacement for one flagged sentence."""

    id: int = Field(ge=0)
    fix: str = Field(max_length=300, description="what must change, decided before writing")
    action: Literal["rewrite", "remove"]
    text: str = Field(max_length=2000)


class RewriteAnswer(BaseModel):
    """All replacements for one response."""

    rewrites: list[RewriteItem]


class NamedError(BaseModel):
    """One statement of the judged text the source does not support, as the judge names it."""

    sentence: str = Field(max_length=1000, description="the sentence, copied from the text")
    problem: str = Field(max_length=400)
    source: str = Field(max_length=400, description="the source's words it contradicts, or ''")


class JudgeErrorsAnswer(BaseModel):
    """The rubric judge's answer (v2): the errors it finds first, then a bounded score."""

    errors: list[NamedError] = Field(max_length=12)
    score: int = Field(ge=1, le=5)
