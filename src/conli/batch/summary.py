"""What one ``conli batch`` run did: its counts, its summary lines, and when it stops early.

``Summary`` counts the records written (and the calls of those that were not), stops the
run after too many backend failures in a row or a first stretch of invalid answers, and
``settle_stop`` turns the latter's records into retryable failures in OUT.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from conli.agents.structured import INVALID_ANSWER
from conli.batch.records import OutLog, Record, calls_of, record_key
from conli.errors import EXIT_INTERRUPTED, OutputParseError

STOP_SETTING = "CONLI_BATCH_STOP_AFTER_FAILURES"


@dataclass
class Summary:
    """What one run did; resumed records are counted in ``skipped``, not in the totals.

    ``earlier_errors``: failed records OUT already held (kept, not run again), so the exit
    code and the summary speak for all of OUT. ``stop_after``: stop the run once that many
    records in a row failed retryably (the backend could not be used), or once the run's
    first that many all ended unverified on invalid answers (``invalid_answer``: the backend
    answers, but never as asked); 0 never. ``backend`` names it in that message. Every
    model call is counted, those of records that ran but were not written too
    (``in_flight``: the run stopped before their turn).
    """

    processed: int = 0
    skipped: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    earlier_errors: int = 0
    calls: int = 0
    failed_calls: int = 0
    cached: int = 0  # records answered from the result cache
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stopped: str | None = None  # the error that ended the run early
    stop_after: int = 0
    failing_in_a_row: int = 0
    backend: str = "the backend"
    in_flight: int = 0
    unanswered: list[str] = field(default_factory=list)  # keys: the first, invalid answers
    unanswered_outcomes: Counter[str] = field(default_factory=Counter)  # and their buckets
    answered: bool = False  # a record got a valid answer: the invalid-answer stop is off

    @property
    def exit_code(self) -> int:
        """0: every record in OUT ok; 1: some failed (now or before); 3 stopped; 130 Ctrl-C."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.stopped:
            return 3
        return 1 if self.errors_in_out else 0

    @property
    def errors_in_out(self) -> int:
        """Failed records in OUT after the run: those it held before, and this run's."""
        return self.earlier_errors + self.errors

    def add(self, record: Record) -> None:
        """Count one written record."""
        self.processed += 1
        self._count_calls(record)
        if not record.get("ok"):
            self.errors += 1
            self._count_failure(record)
            return
        self.failing_in_a_row = 0
        self.outcomes[outcome(record)] += 1
        self.cached += bool((record["result"].get("usage") or {}).get("cached"))
        self._count_answers(record)

    def add_unwritten(self, record: Record) -> None:
        """Count the calls of a record that ran but is not in OUT: the run stopped first."""
        if any(calls_of(record)):
            self.in_flight += 1
            self._count_calls(record)

    def _count_calls(self, record: Record) -> None:
        calls, failed = calls_of(record)
        self.calls, self.failed_calls = self.calls + calls, self.failed_calls + failed
        usage = (record.get("result") or {}).get("usage") or {}
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.cached_tokens += usage.get("cached_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)

    def _count_answers(self, record: Record) -> None:
        """Stop once the run's first ``stop_after`` records all ended on invalid answers.

        Only until a record gets a valid answer: a backend that answered as asked once is
        not misconfigured, and a weak model's odd invalid answer stays the ``unverified``
        verdict it is. A record that asked the model nothing says nothing either way.
        """
        if self.answered or not self.stop_after or not any(calls_of(record)):
            return
        error = invalid_answer(record)
        if error is None:
            self.answered = True
            return
        self.unanswered.append(record_key(record))
        self.unanswered_outcomes[outcome(record)] += 1
        if len(self.unanswered) >= self.stop_after and not self.stopped:
            self.stopped = (f"the first {len(self.unanswered)} records all ended unverified: "
                            f"the backend {self.backend} answered, but never as asked (last: "
                            f"{error}); check that it is a chat model that can answer JSON "
                            f"({STOP_SETTING} sets how many)")

    def _count_failure(self, record: Record) -> None:
        """A retryable failure (the backend) adds to the run of them; bad input does not."""
        if not record.get("retryable"):
            return
        self.failing_in_a_row += 1
        if self.stop_after and self.failing_in_a_row >= self.stop_after and not self.stopped:
            error = record.get("error") or {}
            self.stopped = (f"{self.failing_in_a_row} records in a row failed on the backend "
                            f"(last: {error.get('type')}: {error.get('message')}; "
                            f"{STOP_SETTING} sets how many)")

    def format(self) -> str:
        """Format the end-of-run summary as a few human-readable lines."""
        rate = self.processed / self.seconds if self.seconds else 0.0
        state = "interrupted" if self.interrupted else "stopped" if self.stopped else "done"
        errors = f"errors {self.errors_in_out}"
        if self.earlier_errors:
            errors += f" ({self.errors} this run)"
        lines = [
            f"conli batch {state}: {self.processed} records in {self.seconds:.1f}s ({rate:.2f}/s); "
            f"{self.skipped} already in OUT",
            "  " + " · ".join(
                [f"{name} {count}" for name, count in sorted(self.outcomes.items())] + [errors]
            ),
            f"  {self.calls} model calls answered, {self.failed_calls} failed; "
            f"{self.prompt_tokens:,} prompt tokens ({self.cached_tokens:,} cached), "
            f"{self.completion_tokens:,} generated"
            + (f"; {self.cached} records from the result cache" if self.cached else ""),
        ]
        if self.in_flight:
            lines.append(f"  records running when the run stopped: {self.in_flight} (their "
                         "calls are counted above; the records are left out of OUT)")
        if self.stopped:
            lines.append(f"  stopped early: {self.stopped}; fix it and re-run to resume")
        if self.interrupted:
            lines.append("  re-run the same command to resume")
        return "\n".join(lines)


def outcome(record: Record) -> str:
    """Name the summary bucket of a successful record: its verdict, or its judge score.

    Scores are bucketed to the rubric's integers (a distribution's mean is continuous).
    """
    result = record["result"]
    if "verdict" in result:
        return str(result["verdict"])
    judged = result.get("judge", {})
    score = judged.get("score")
    return f"score {int(score + 0.5)}" if score else "unverified"


def invalid_answer(record: Record) -> str | None:
    """The error an ok record ended unverified on, if only invalid model answers made it so.

    ``agents.structured`` re-asks once for an answer that does not validate, then records
    an ``INVALID_ANSWER`` error where the answer was wanted: on each judgement it leaves
    unverified, on the judge's result. A record counts when nothing in it was verified
    and every error it shows is such an answer; one unverified for another reason does not.
    """
    result = record.get("result") or {}
    if "verdict" in result:  # check, rewrite
        verified = result["verdict"] != "unverified"
        errors = [j.get("error") for s in result.get("sentences", [])
                  for j in s.get("judgements", []) if j.get("verdict") == "unverified"]
    else:  # judge
        judge = result.get("judge") or {}
        verified = judge.get("status") != "unverified" and not _nothing_verified(judge)
        errors = [judge.get("error")]
    if verified or not errors or not all(e and INVALID_ANSWER in e for e in errors):
        return None
    return str(errors[-1])


def _nothing_verified(judge: Record) -> bool:
    """The grounded judge scored from sentences every one of which is unverified."""
    checked = [s for s in (judge.get("audit") or {}).get("sentences", []) if s.get("checked")]
    return bool(checked) and all(s.get("verdict") == "unverified" for s in checked)


def settle_stop(log: OutLog, summary: Summary) -> None:
    """After a stop on invalid answers, make those records retryable failures in OUT.

    They were written ``ok`` (unverified), so a re-run would keep them; stopped as a failing
    backend's run is, they run again once the backend is fixed.
    """
    if summary.stop_after and len(summary.unanswered) >= summary.stop_after:
        log.fail(summary.unanswered, OutputParseError(
            f"the backend {summary.backend} never answered as asked; the run was stopped"))
        summary.errors += len(summary.unanswered)
        summary.outcomes -= summary.unanswered_outcomes
