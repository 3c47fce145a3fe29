"""``granite-guardian``: Granite Guardian's groundedness risk as a detector.

Two ways to ask, by ``prompt``:

- ``template`` (default on ``vllm:``): the served model's own chat template does the
  formatting, given Granite Guardian 3.3's documented inputs: the claim as the assistant's
  message, the chunk as a document, ``guardian_config={"criteria_id": "groundedness"}``
  and ``think=False`` (vLLM's ``chat_template_kwargs``). It answers
  ``<think></think><score> yes|no </score>``; the yes/no token's alternatives give P(risk).
  Its tags (the think block, ``<score>`` and ``</score>``) are the format's; an answer with
  anything else around the label (prose that says yes or no) is no verdict.
- ``rendered`` (default elsewhere): the 3.x groundedness prompt written out
  (``granite_guardian.v1``), for a server that applies a plain template; the first token
  is "Yes" (risk) or "No".

P(risk) = P(yes) / (P(yes) + P(no)) as IBM's cookbooks compute it; the support score is
1 - P(risk).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from conli.backends.base import Backend
from conli.backends.calls import CallRecord
from conli.detectors.checkers import (
    CheckerOptions,
    Reading,
    SpecialisedChecker,
    label_of,
    label_probabilities,
    unreadable,
)
from conli.prompts import Prompt, render
from conli.prompts.boundary import defuse

TEMPLATE = "granite_guardian.v1"
CHAT_TEMPLATE = "granite-guardian-3.3:chat-template"  # what judgements record on that path
TEMPLATE_ANSWER_TOKENS = 24  # "<think>\n</think>\n<score> yes </score>" and some slack
# the format's own tags around its label: a think block (empty with think off) and the score's
TAGS = re.compile(r"<think>.*?</think>|</?score>", re.DOTALL | re.IGNORECASE)


class GuardianOptions(CheckerOptions):
    """Granite Guardian's settings: the checker's, and how to ask it."""

    prompt: Literal["auto", "template", "rendered"] = Field(default="auto",
        description="template: the served model's chat template with guardian_config "
        "(vLLM, or llama-server with --jinja); rendered: the prompt written out; auto: "
        "template on vllm:, rendered elsewhere")


class GraniteGuardian(SpecialisedChecker):
    """Each claim against each source chunk as a groundedness risk; the best chunk decides."""

    name = "granite-guardian"
    label = "Granite Guardian"
    options = GuardianOptions

    def __init__(self, options: GuardianOptions | None = None) -> None:
        super().__init__(options or GuardianOptions())
        self.prompt = self.settings.prompt if isinstance(self.settings, GuardianOptions) \
            else "auto"

    def template_for(self, backend: Backend) -> str:
        """The rendered prompt's version, or the served chat template's on that path."""
        return CHAT_TEMPLATE if self._templated(backend) else TEMPLATE

    def recorded(self, backend: Backend, spotlight: bool) -> str:
        """As every checker records, but the server's own template marks nothing."""
        return super().recorded(backend, spotlight and not self._templated(backend))

    def _templated(self, backend: Backend) -> bool:
        return self.prompt == "template" or (self.prompt == "auto" and backend.name == "vllm")

    def ask(self, backend: Backend, chunk: str, claim: str, *, spotlight: bool = False
            ) -> tuple[Reading, CallRecord]:
        """One groundedness question; support is 1 - P(risk).

        The server's own chat template (vLLM) writes the prompt itself: no marks there.
        """
        if self._templated(backend):
            prompt = Prompt([{"role": "assistant", "content": defuse(claim)}], CHAT_TEMPLATE)
            kwargs = {"guardian_config": {"criteria_id": "groundedness"}, "think": False,
                      "documents": [{"doc_id": "0", "text": defuse(chunk)}]}
            completion, record = self.call(backend, prompt, TEMPLATE_ANSWER_TOKENS,
                                           chat_template_kwargs=kwargs)
        else:
            prompt = render(TEMPLATE, context=chunk, response=claim, spotlight=spotlight)
            completion, record = self.call(backend, prompt, max_tokens=1)
        label = label_of(completion.text, TAGS)
        if label is None:
            return unreadable(completion), record
        said = "no" if label == "yes" else "yes"  # its Yes is the risk: not supported
        read = label_probabilities(completion, label)
        if read is None or sum(read) <= 0:
            return Reading(None, said), record
        risk = read[0] / (read[0] + read[1])
        return Reading(1.0 - risk, said), record
