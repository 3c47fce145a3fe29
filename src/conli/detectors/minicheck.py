"""``minicheck``: MiniCheck (Bespoke-MiniCheck-7B) as a detector, on any server that runs it.

Its own prompt (``minicheck.v1``: the system prompt and "Document: ... Claim: ..."), a
one-token answer, and P(supported) = P("Yes") summed over the answer token's top
alternatives, as MiniCheck's reference reads it (not renormalised against "No"). Any model
can be asked this way: the embedded one (``--llm local``) answers it as a one-token,
prefill-only detector.
"""

from __future__ import annotations

from conli.backends.base import Backend
from conli.backends.calls import CallRecord
from conli.detectors.checkers import Reading, SpecialisedChecker, first_word, yes_probability
from conli.prompts import render

TEMPLATE = "minicheck.v1"


class MiniCheck(SpecialisedChecker):
    """Each claim against each source chunk in MiniCheck's format; the best chunk decides."""

    name = "minicheck"
    label = "MiniCheck"

    def template_for(self, backend: Backend) -> str:
        """Its one prompt's version, whatever the server."""
        return TEMPLATE

    def ask(self, backend: Backend, chunk: str, claim: str) -> tuple[Reading, CallRecord]:
        """One "Document: ... Claim: ..." question, answered in one token."""
        prompt = render(TEMPLATE, document=chunk, claim=claim)
        completion, record = self.call(backend, prompt, max_tokens=1)
        read = yes_probability(completion)
        return Reading(read[0] if read else None, first_word(completion.text)), record
