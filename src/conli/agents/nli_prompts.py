"""One record per version of the NLI prompt: its templates, answer models and call shape.

Everything that differs between versions is here, looked up by name; ``auto`` is resolved
to a concrete version once per run (``resolve_nli_prompt``), where the backend is known;
``for_backend`` makes a whole plan concrete there (the prompt and the ``auto`` detector).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from conli.agents.answers import (
    NLIAnswer,
    NLIClaimAnswer,
    NLIClaimLabelAnswer,
    NLILabelOnlyAnswer,
    NLIReasonedAnswer,
)
from conli.backends.base import Backend, Capabilities
from conli.config import DetectionSettings, Settings
from conli.errors import ConfigError
from conli.prompts.boundary import Trusted
from conli.prompts.spotlight import versioned
from conli.run.plan import Plan, adjusted

Kind = Literal["sentence", "entity"]  # a whole claim, or the [ tagged ] words of a claim


@dataclass(frozen=True)
class NLIPrompt:
    """A version of the NLI prompt.

    ``one_claim``: each call holds one claim, answered as a bare object (else a numbered
    batch, answered as ``{"judgements": [...]}``). ``quotes_evidence``: the reasoned answer
    quotes the source first. ``*_item``: the ``$defs`` name of a batch item (None for one
    claim). ``label_opening``: the answer up to its label, prefilled to score from one token.
    """

    version: str
    one_claim: bool
    quotes_evidence: bool
    reasoned: type[BaseModel]
    label_only: type[BaseModel]
    reasoned_item: str | None
    label_only_item: str | None
    label_opening: str

    def template(self, kind: Kind) -> str:
        """The versioned template name for ``kind``, e.g. ``nli_sentence.v3``."""
        return f"nli_{kind}.{self.version}"

    def answer(self, chain_of_thought: bool) -> tuple[type[BaseModel], str | None]:
        """The answer model and its batch item's schema name."""
        if chain_of_thought:
            return self.reasoned, self.reasoned_item
        return self.label_only, self.label_only_item


_BATCH_LABEL = '{"judgements": [{"id": 0, "label": "'
NLI_PROMPTS: dict[str, NLIPrompt] = {
    "v1": NLIPrompt("v1", False, True, NLIAnswer, NLILabelOnlyAnswer, "NLIItem", "NLILabelOnly",
                    _BATCH_LABEL),
    "v2": NLIPrompt("v2", False, False, NLIReasonedAnswer, NLILabelOnlyAnswer, "NLIReasonedItem",
                    "NLILabelOnly", _BATCH_LABEL),
    "v3": NLIPrompt("v3", True, True, NLIClaimAnswer, NLIClaimLabelAnswer, None, None,
                    '{"label": "'),
}


def nli_prompt(version: str) -> NLIPrompt:
    """The record of a concrete version (``auto`` must be resolved first)."""
    try:
        return NLI_PROMPTS[version]
    except KeyError:
        raise ConfigError(
            f"unknown NLI prompt {version!r}; known: {', '.join(NLI_PROMPTS)}"
        ) from None


def resolve_nli_prompt(settings: DetectionSettings, capabilities: Capabilities) -> str:
    """The concrete version a setting means on a backend: ``auto`` is v3 for one claim a call.

    v3 where calls hold one claim (the embedded model): v1's batch wrapper would be
    prefilled on every call for nothing. v1 elsewhere, whose batches let hosted models
    judge several claims per call.
    """
    if settings.nli_prompt != "auto":
        return settings.nli_prompt
    configured = settings.hypotheses_per_call
    one = configured == 1 if configured is not None else not capabilities.judges_batches
    return "v3" if one else "v1"


def batch_size(settings: DetectionSettings, capabilities: Capabilities) -> int:
    """Claims per NLI call: one for one-claim prompts and backends that judge only the first."""
    if nli_prompt(settings.nli_prompt).one_claim:
        return 1
    if settings.hypotheses_per_call is not None:
        return settings.hypotheses_per_call
    return settings.hosted_hypotheses_per_call if capabilities.judges_batches else 1



@dataclass(frozen=True)
class Layout:
    """A source-reading step's prompt: its template, the variables its layout adds, and its version.

    ``version`` is what results record; it names the NLI base in the shared layout, and
    ``+datamark`` when ``spotlight`` marks the data (``prompts.spotlight``).
    """

    template: str
    variables: dict[str, Any]
    version: str
    spotlight: bool = False

    @property
    def shared(self) -> bool:
        """Opens as the NLI prompt does (its rules and examples come first)."""
        return bool(self.variables)


def laid_out(own: str, shared: str, settings: Settings, capabilities: Capabilities) -> Layout:
    """The step's prompt in ``settings.prompt_layout``: its ``own`` template, or ``shared``.

    A shared-layout template (``mitigate.v2``, ``judge_rubric.v3``) extends the NLI base of
    the run's version with its own ``task`` block, so it opens exactly as the check's NLI
    calls do (rules, worked examples, the source): a prompt cache holding them prefills
    only what follows. Its version names the base too, e.g. ``mitigate.v2+nli_base.v3``.
    The NLI version is the one the run uses on a backend of ``capabilities``.
    """
    if settings.prompt_layout == "own":
        return Layout(own, {}, versioned(own, settings.spotlight), settings.spotlight)
    return opening_as_nli(shared, settings, capabilities)


def opening_as_nli(template: str, settings: Settings, capabilities: Capabilities) -> Layout:
    """``template`` over the NLI base of the run's version (see ``laid_out``'s shared)."""
    base = f"nli_base.{nli_prompt(resolve_nli_prompt(settings, capabilities)).version}"
    variables = {"nli_base": Trusted(f"{base}.jinja"), "cot": settings.chain_of_thought,
                 "hypotheses": []}
    return Layout(template, variables, versioned(f"{template}+{base}", settings.spotlight),
                  settings.spotlight)


def for_backend(plan: Plan, backend: Backend) -> Plan:
    """``plan`` made concrete for ``backend``: each ``auto`` becomes a choice.

    The NLI prompt version for the backend's capabilities; the ``auto`` detector becomes
    ``fused`` where the backend reads its own hidden states (the embedded model), else ``cot``.
    """
    settings = resolve(plan.settings, backend)
    return plan if settings is plan.settings else dataclasses.replace(plan, settings=settings)


def resolve(settings: Settings, backend: Backend) -> Settings:
    """``settings`` made concrete for ``backend`` (see ``for_backend``).

    ``ConfigError`` for semantic word scores on a backend without hidden states: refused
    here, before the check's model calls, rather than after them in the coverage step.
    """
    if settings.word_scores == "semantic" and not backend.capabilities.hidden_states:
        raise ConfigError(f"--word-scores semantic reads the model's hidden states, which "
                          f"{backend.name} does not serve; use lexical or the embedded model "
                          "(--llm local)")
    version = resolve_nli_prompt(settings, backend.capabilities)
    preset = "fused" if backend.capabilities.hidden_states else "cot"
    chosen = [preset if name == "auto" else name for name in settings.detectors]
    if version == settings.nli_prompt and chosen == settings.detectors:
        return settings
    return adjusted(settings, nli_prompt=version, detectors=chosen)
