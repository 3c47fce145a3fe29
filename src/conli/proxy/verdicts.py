"""What goes out after a check: the operator's policy, the text sent, and the ``conli`` field.

The policy is ``ProxySettings``' (``on_flag``, the refusal, what to do with no source and
with a check that cannot run); a request may only make ``on_flag`` stricter. A reply goes
out marked ``checked`` only when its check completed; every other way out (no source, a
failed check passed on by the operator's choice, an empty reply) is marked ``unchecked``,
never supported.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, Field

from conli.chat.state import reply_text
from conli.config import ProxySettings
from conli.errors import ConfigError, InputError
from conli.models import CheckResult, Score, Verdict
from conli.pipeline import Checker
from conli.proxy.wire import NO_SOURCE, Found, OnFlag, Turn, stricter
from conli.run.inputs import validate_sources, validate_text
from conli.run.plan import RunOptions, make_plan
from conli.run.request import RunRequest

Action = Literal["as_written", "rewritten", "blocked"]
BLOCKED_FINISH = "content_filter"  # OpenAI's finish_reason for a reply its filter held back
VERDICT_HEADER, SHARE_HEADER, ACTION_HEADER = (
    "X-Conli-Verdict", "X-Conli-Supported-Share", "X-Conli-Action")


@dataclass(frozen=True)
class Policy:
    """The operator's choices for every reply, and one request's ``on_flag`` within them."""

    on_flag: OnFlag
    refusal: str
    no_source: Literal["refuse", "pass"]
    on_check_error: Literal["refuse", "pass"]
    system_as_source: bool

    @classmethod
    def of(cls, settings: ProxySettings) -> Policy:
        """The policy the ``ProxySettings`` (``CONLI_PROXY_ON_FLAG``, ...) set."""
        return cls(on_flag=settings.proxy_on_flag, refusal=settings.proxy_refusal,
                   no_source=settings.proxy_no_source,
                   on_check_error=settings.proxy_on_check_error,
                   system_as_source=settings.proxy_system_as_source)

    def for_turn(self, turn: Turn) -> Policy:
        """The policy for one request: its ``on_flag``, if at least as strict as the operator's."""
        return replace(self, on_flag=stricter(self.on_flag, turn.on_flag))

    @property
    def mode(self) -> Literal["check", "rewrite"]:
        """The check's mode: rewrite when ``on_flag`` is rewrite, else detect only."""
        return "rewrite" if self.on_flag == "rewrite" else "check"

    def options(self, turn: Turn, max_sentences: int | None = None) -> RunOptions:
        """The check's options: the request's ``conli`` choices and the sentence limit."""
        if max_sentences is None:
            return turn.options
        return turn.options.model_copy(update={"max_response_sentences": max_sentences})

    def run(self, checker: Checker, request: RunRequest, *,
            within: float | None = None) -> CheckResult:
        """``request`` checked through the policy's mode's entrance (``mode``)."""
        entrance = checker.run_rewrite if self.mode == "rewrite" else checker.run_check
        return entrance(request, within=within)


def refuse_early(checker: Checker, turn: Turn, policy: Policy) -> None:
    """Refuse before the model is asked: no source (where refused), a bad one, bad options.

    The sources and question are validated with the check's limits, and the request's
    options prepared on ``checker`` (a detector it cannot run is an ``InputError`` here).
    """
    if turn.sources is None:
        if policy.no_source == "refuse":
            raise InputError(f"{NO_SOURCE} (CONLI_PROXY_NO_SOURCE=refuse)")
        return
    limit = checker.settings.max_source_chars
    validate_sources(turn.sources, limit)
    if turn.question is not None:
        validate_text(turn.question, name="question", max_chars=limit)
    try:
        checker.prepare(make_plan(checker.settings, policy.options(turn).in_mode(policy.mode)))
    except ConfigError as exc:
        raise InputError(f"conli: the request's options cannot run here: {exc}") from exc


class Verdicts(BaseModel):
    """The ``conli`` field of an answer (of its last chunk, streamed): what conli did and found."""

    status: Literal["checked", "unchecked"] = Field(
        description="checked: the reply's check completed; unchecked: it did not (reason says "
        "why) and the reply went out as written")
    verdict: Verdict | None = Field(default=None, description="the reply's verdict, checked")
    supported_share: Score | None = Field(
        default=None, description="supported checked sentences over checked sentences")
    action: Action = Field(description="what was sent: the reply as_written, rewritten, or "
                           "blocked (the operator's refusal in its place)")
    on_flag: OnFlag
    sources_from: Found | None = Field(
        default=None, description="where the sources came from: conli, tool, system or header")
    reason: str | None = Field(default=None, description="why unchecked or blocked")
    original: str | None = Field(
        default=None, description="the upstream's reply, when the text sent differs from it")
    result: CheckResult | None = Field(
        default=None, description="the whole check (sentences, reasons, sources, rewrite, "
        "usage), as /v1/check answers it")

    def headers(self) -> dict[str, str]:
        """``X-Conli-Verdict`` (unchecked when not checked), the supported share, the action."""
        verdict = self.verdict if self.status == "checked" and self.verdict else "unchecked"
        headers: dict[str, str] = {VERDICT_HEADER: verdict, ACTION_HEADER: self.action}
        if self.status == "checked" and self.supported_share is not None:
            headers[SHARE_HEADER] = f"{self.supported_share:.4g}"
        return headers


def unchecked(reason: str, policy: Policy, found: Found | None = None) -> Verdicts:
    """The reply goes out as written, marked unchecked, with why."""
    return Verdicts(status="unchecked", action="as_written", on_flag=policy.on_flag,
                    sources_from=found, reason=reason)


def decided(result: CheckResult, reply: str, policy: Policy,
            found: Found | None) -> tuple[str, Verdicts]:
    """The text to send after a whole reply's check, and the ``conli`` field that says why.

    A supported reply goes as written. Otherwise ``annotate`` sends it as written, ``block``
    the refusal, and ``rewrite`` the verified rewrite: the refusal when the rewrite removed
    every sentence or did not complete (a flag left in the text is never sent). An
    unverified reply is sent as written under rewrite (its verdict says so), refused under
    block.
    """
    text, action, reason = _outcome(result, reply, policy)
    return text, Verdicts(status="checked", verdict=result.verdict,
                          supported_share=result.supported_share, action=action,
                          on_flag=policy.on_flag, sources_from=found, reason=reason,
                          original=reply if text != reply else None, result=result)


def _outcome(result: CheckResult, reply: str, policy: Policy) -> tuple[str, Action, str | None]:
    verdict = result.verdict
    if verdict == "supported" or policy.on_flag == "annotate":
        return reply, "as_written", None
    if policy.on_flag == "block":
        return policy.refusal, "blocked", f"the reply is {verdict}"
    if verdict == "unverified":
        return reply, "as_written", None
    mitigation = result.mitigation
    if mitigation.status != "rewritten":
        why = f": {mitigation.error}" if mitigation.error else ""
        return policy.refusal, "blocked", f"the rewrite did not complete ({mitigation.status}{why})"
    text = reply_text(result)
    if text is None:
        return policy.refusal, "blocked", "the rewrite removed every sentence"
    return text, "rewritten", None
