"""The library entry point: build the dependencies once, check many (source, response) pairs."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from types import TracebackType
from typing import Any, Self

from conli import detectors, judges, telemetry
from conli.agents.nli import warm_up
from conli.agents.nli_prompts import for_backend
from conli.agents.windows import MIN_WINDOW_TOKENS
from conli.backends import get_backend
from conli.backends.base import Backend
from conli.backends.endpoints import Endpoints
from conli.calibration import calibration_for
from conli.config import BUILT_FIELDS, Settings
from conli.detectors.checkers import SpecialisedChecker
from conli.errors import ConfigError, ConliError, ContextOverflowError
from conli.gate import passes
from conli.graph import Deps
from conli.graph.identity import run_identity
from conli.graph.runner import KeptPlans, Prepared
from conli.graph.state import result_of
from conli.models import CheckResult
from conli.ner import get_recognizer
from conli.run.cache import ResultCache, cached_run
from conli.run.context import Progress, scope
from conli.run.doors import JudgeOnlyResult
from conli.run.inputs import CheckInput, Source
from conli.run.many import Pair, ProgressChoice, check_many, pairs_of
from conli.run.plan import Plan, RunOptions, applied, make_plan, options, plan_for
from conli.run.request import RunRequest, StreamRequest
from conli.run.table import PairResults
from conli.streaming import Busy, DoneEvent, Events, SentenceEvent, stream_check
from conli.text.nlp import load_pipeline
from conli.text.tokens import at_least_tokens

_PROMPT_OVERHEAD_TOKENS = 1200
PREPARED_KEPT = 32  # distinct per-call settings whose detectors a checker keeps built


class Checker:
    """Holds a backend, the NER, the detectors and the compiled graph; runs requests.

    Built from a ``Plan`` (``conli.run.plan``: settings with a run's choices, its deadline
    and mode) or from ``Settings`` alone. The plan is resolved once here (``for_backend``):
    ``auto`` becomes the concrete NLI prompt for this backend, and the detector presets
    become the list the graph is built from. A per-call plan is prepared once for equal
    settings (``prepare``): its detectors built and its calibration read once, not per call.
    A front door calls one typed entrance with a ``RunRequest``: ``run`` (the plan's own
    steps), ``run_check``, ``run_rewrite`` (each a ``CheckResult``) or ``run_judge`` (a
    ``JudgeOnlyResult``); a stream calls ``run_stream`` with a ``StreamRequest``. With a
    ``result_cache`` (``conli.run.cache``), each but the stream answers a check already
    made from it.
    """

    def __init__(self, plan: Plan | Settings | None = None, backend: Backend | None = None,
                 *, result_cache: ResultCache | None = None) -> None:
        requested = plan if isinstance(plan, Plan) else make_plan(plan)
        judges.get(requested.settings.judge_mode)  # an unknown mode, before any backend loads
        self.backend = backend or get_backend(requested.settings.llm, requested.settings)
        plan = for_backend(requested, self.backend)
        self.settings = plan.settings
        self._nlp = load_pipeline()
        self._ner = get_recognizer(self.settings, self._nlp)
        self._graphs: dict[tuple[str, ...], Any] = {}
        self._endpoints = Endpoints()  # detectors' own servers, shared by every plan
        self._kept = KeptPlans(PREPARED_KEPT)
        self._prepared = Prepared(plan, *self._ready(plan.settings))
        self._kept.pin(self._prepared.deps)
        self._telemetry = telemetry.emitter(self.settings)  # ConfigError without the extra
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._closed = False
        self.result_cache = result_cache
        # the static NLI prefix, restored from disk or prefilled once, before any check
        # (none when no detector asks the NLI prompts: a specialised checker alone)
        names = list(self.deps.detectors)
        self.warm_up_seconds = warm_up(self.backend, self.settings) \
            if detectors.ASKS_NLI & set(names) else 0.0

    @property
    def deps(self) -> Deps:
        """The run context the compiled graph needs (for use as a LangGraph subgraph)."""
        return self._prepared.deps

    @property
    def graph(self) -> Any:
        """The compiled graph, built once; invoke it with ``context=self.deps``."""
        return self._prepared.graph

    @property
    def plan(self) -> Plan:
        """The checker's own plan: its settings, resolved for its backend."""
        return self._prepared.plan

    def run(self, request: RunRequest, *, plan: Plan | Prepared | None = None,
            within: float | None = None, progress: Progress | None = None) -> CheckResult:
        """Run ``request`` on ``plan``'s own steps (default: the checker's): the whole result.

        One typed entrance a mode (``run_check``, ``run_rewrite``, ``run_judge``), and this
        one for a plan's own steps (a library call's per-call plan, ``conli check``'s): a
        front door calls the one it is. The request's options (``RunOptions``) apply over
        the plan; naming a mode there is a ``ConfigError`` (its entrance chooses it).
        ``within`` is the door's own time limit (seconds). A check the checker's
        ``result_cache`` holds is answered from it, with no model call (``usage.cached``).
        """
        if request.options.mode is not None:
            raise ConfigError(f"a request's mode is chosen by its entrance: call "
                              f"run_{request.options.mode}")
        return self._whole(request, request.options, within, progress, plan)

    def run_check(self, request: RunRequest, *, within: float | None = None,
                  progress: Progress | None = None) -> CheckResult:
        """``check`` mode: detect only (and the judge, where the request's options ask it)."""
        return self._whole(request, request.options.in_mode("check"), within, progress)

    def run_rewrite(self, request: RunRequest, *, within: float | None = None,
                    progress: Progress | None = None) -> CheckResult:
        """``rewrite`` mode: detect, then rewrite the unsupported sentences."""
        return self._whole(request, request.options.in_mode("rewrite"), within, progress)

    def run_judge(self, request: RunRequest, *, within: float | None = None,
                  progress: Progress | None = None) -> JudgeOnlyResult:
        """``judge`` mode: the 1-5 score of the response alone, and what it cost."""
        result = self._whole(request, request.options.in_mode("judge"), within, progress)
        if result.judge_refined is None:
            raise ConfigError("the judge did not run")
        return JudgeOnlyResult(judge=result.judge_refined, usage=result.usage)

    def _whole(self, request: RunRequest, given: RunOptions, within: float | None,
               progress: Progress | None, plan: Plan | Prepared | None = None) -> CheckResult:
        """``request``'s texts run on ``plan`` (the checker's) with ``given`` over it (cached)."""
        ready = plan if isinstance(plan, Prepared) else self.prepare(plan)
        if given.chosen():
            ready = self.prepare(applied(ready.plan, given))
        if within is not None:
            ready = ready.within(within)
        return cached_run(self.result_cache,
                          lambda digest: run_identity(ready.plan, ready.deps, digest),
                          request.texts,
                          lambda: self.run_graph(request.texts, plan=ready, progress=progress))

    def check(
        self,
        source: Source,
        response: str,
        *,
        question: str | None = None,
        points: object = None,
        plan: Plan | Prepared | None = None,
        settings: Settings | None = None,
    ) -> CheckResult:
        """Detect, mitigate and judge; raise ``InputError`` for inputs we cannot check.

        ``points`` (a list of strings or ``{perspective: [strings]}``) are what the
        response must cover. ``plan`` (``conli.run.plan.make_plan``) overrides this
        checker's for one call (e.g. detect only), reusing the same backend and NER
        (``settings`` does too, deprecated). A backend that cannot be used raises
        ``BackendError``: the check failed, it did not find the text supported. The texts
        become a ``RunRequest`` run by ``run`` (so a ``result_cache`` answers it too).
        """
        if settings is not None:
            warnings.warn("Checker.check(settings=...) is deprecated: pass "
                          "plan=conli.run.plan.make_plan(settings)", DeprecationWarning,
                          stacklevel=2)
            plan = plan if plan is not None else make_plan(settings)
        ready = plan if isinstance(plan, Prepared) else self.prepare(plan)
        request = RunRequest.of(source, response, limits=ready.plan.settings, question=question,
                                points=points)
        return self.run(request, plan=ready)

    def run_graph(self, checked: CheckInput, *, plan: Plan | Prepared | None = None,
                  progress: Progress | None = None) -> CheckResult:
        """Run the graph on texts already validated (``RunRequest``): the whole ``CheckResult``.

        A ``Prepared`` plan runs on the run context it was prepared with, built nothing again.
        """
        ready = plan if isinstance(plan, Prepared) else self.prepare(plan)
        deps = ready.deps
        self._refuse_if_response_cannot_fit(checked.response)
        started = time.perf_counter()
        inputs = {"source": checked.source, "response": checked.response,
                  "question": checked.question, "points": checked.points,
                  "source_map": checked.source_map}
        try:
            with scope(ready.plan.deadline, progress), self._kept.running(deps):
                state = ready.graph.invoke(inputs, context=deps)
        except ConliError as error:
            if self._telemetry is not None:
                self._telemetry.failure(error, list(deps.detectors))
            raise
        result = result_of(state, self.backend, time.perf_counter() - started)
        result.source_names = list(checked.source_map.names)
        if deps.calibration is not None:
            result.calibration = deps.calibration.use
        result.threshold = ready.plan.threshold
        result.passed = passes(result, result.threshold)
        if self._telemetry is not None:
            self._telemetry.result(result, list(deps.detectors))
        return result

    def check_many(
        self,
        pairs: Iterable[Pair],
        *,
        plan: Plan | None = None,
        threshold: float | None = None,
        max_concurrency: int | None = None,
        progress: ProgressChoice = None,
    ) -> PairResults:
        """Check every (source, response) pair; one ``PairResult`` each, in input order.

        ``pairs`` may be a pandas DataFrame or an HF dataset (rows read by their column
        names, RAGAS' and DeepEval's too: ``conli.run.table``); the results have
        ``to_pandas()`` and ``to_dataset()``. ``plan`` (default: the checker's) and
        ``threshold`` override this checker's for these checks, prepared once for every
        pair. Up to ``max_concurrency`` checks at once (default
        ``Settings.max_concurrency``), with a progress bar where stderr is a terminal
        (``progress`` forces it on or off, or is called with ``(done, total)``). A pair that
        fails gets an error result in its place (``conli.run.many``); settings that cannot
        be used raise before any check.
        """
        given = pairs_of(pairs)
        ready, limit = self.prepare_many(plan, threshold=threshold,
                                         max_concurrency=max_concurrency)
        return check_many(lambda fields: self.check(**fields, plan=ready), given, limit=limit,
                          progress=progress)

    def prepare_many(self, plan: Plan | None = None, *, threshold: float | None = None,
                     max_concurrency: int | None = None) -> tuple[Prepared, int]:
        """The prepared plan of a many-pairs call and its bound on checks at once.

        ``plan`` (default: the checker's) with ``threshold`` over it; the bound is
        ``max_concurrency``, else the plan's setting. ``ConfigError`` for a bound below 1.
        """
        chosen = plan if plan is not None else self.plan
        if threshold is not None:
            chosen = applied(chosen, options(threshold=threshold))
        ready = self.prepare(chosen)
        limit = ready.plan.settings.max_concurrency if max_concurrency is None \
            else max_concurrency
        if limit < 1:
            raise ConfigError(f"max_concurrency must be at least 1, not {limit}")
        return ready, limit

    def executor(self) -> ThreadPoolExecutor:
        """The pool async callers (``conli.acheck``) run checks on: ``max_concurrency`` at once.

        Built on first use and sized by this checker's ``Settings.max_concurrency`` (a
        setting per-call overrides cannot change), so concurrent callers share one bound.
        """
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.settings.max_concurrency,
                                                thread_name_prefix="conli-check")
            return self._pool

    def astream(
        self,
        source: Source,
        chunks: AsyncIterable[str],
        *,
        question: str | None = None,
        plan: Plan | None = None,
        busy: Busy = nullcontext,
    ) -> AsyncGenerator[SentenceEvent | DoneEvent, None]:
        """Check a reply as it streams in: each sentence's verdict as soon as it is complete.

        ``chunks`` is the reply as a chat SDK streams it. A sentence is complete once the next
        one has started or the stream has ended; each is checked on its own, detect only
        (``plan`` minus rewrite and judge; the detectors are built once a
        stream), in a worker thread, and yielded in order as a
        ``SentenceEvent`` (offsets index the whole reply), then one ``DoneEvent``. A bad
        source raises ``InputError`` from this call, before any chunk is read; a
        ``BackendError`` ends the iteration with that error. Closing the iterator stops the
        reading and starts no further check (one already running finishes first). Each
        sentence's check runs inside ``busy()`` (the service's idle clock stops then).
        """
        limits = (plan if plan is not None else self.plan).settings
        return self.run_stream(StreamRequest.of(source, chunks, limits=limits, question=question),
                               plan=plan, busy=busy)

    def run_stream(self, request: StreamRequest, *, plan: Plan | None = None,
                   within: float | None = None, busy: Busy = nullcontext) -> Events:
        """The stream's entrance: ``request``'s reply checked sentence by sentence (``astream``).

        Detect only; the request's options apply over ``plan`` (default: the checker's), and
        ``within`` is the door's own time limit (seconds).
        """
        return stream_check(self, request, plan=plan, within=within, busy=busy)

    def prepare(self, plan: Plan | None = None) -> Prepared:
        """The run context and graph for a per-call ``plan`` (None: this checker's own).

        Its detectors are built and its calibration read once per distinct resolved settings
        (the last ``PREPARED_KEPT`` kept); the deadline and mode are the plan's own, per call.
        A plan may not change what shaped the backend and NER (``BUILT_FIELDS``).
        """
        if plan is None or plan is self._prepared.plan:
            return self._prepared
        changed = sorted(
            name for name in BUILT_FIELDS
            if getattr(plan.settings, name) != getattr(self.settings, name)
        )
        if changed:
            raise ConfigError(
                f"per-call settings cannot change {', '.join(changed)}: they shaped the backend "
                "and NER this checker built; build a new Checker for them"
            )
        judges.get(plan.settings.judge_mode)
        plan = for_backend(plan, self.backend)
        return Prepared(plan, *self._ready(plan.settings))

    def _ready(self, resolved: Settings) -> tuple[Deps, Any]:
        """The run context and graph for resolved settings, built once and kept (LRU)."""

        def build() -> tuple[Deps, Any]:
            names = detectors.resolve(resolved)
            detectors.refuse_a_threshold_without_scores(resolved, self.backend, names)
            detectors.refuse_a_reader_it_cannot_serve(resolved, self.backend, names)
            deps = Deps(backend=self.backend, ner=self._ner, nlp=self._nlp, settings=resolved,
                        detectors=detectors.build(names, resolved.detector_options),
                        calibration=calibration_for(resolved, self.backend, names),
                        endpoints=self._endpoints)
            if tuple(names) not in self._graphs:
                from conli.graph.build import build_graph  # LangGraph: loaded when first built

                self._graphs[tuple(names)] = build_graph(names)
            return deps, self._graphs[tuple(names)]

        return self._kept.get(resolved.model_dump_json(), build)

    def endpoints(self) -> list[tuple[str, Callable[[], Backend]]]:
        """The model servers this checker's own plan reaches, each named, to probe.

        ``--llm``'s, and each detector's own server (``detector_options.NAME.llm``); a
        detector's is reached (built) only when asked for.
        """
        found: list[tuple[str, Callable[[], Backend]]] = [
            (f"--llm ({self.backend.name}, {self.backend.model})", lambda: self.backend)]
        for name, detector in self.deps.detectors.items():
            if isinstance(detector, SpecialisedChecker) and detector.spec() is not None:
                found.append((f"detector {name}'s server ({detector.spec()})",
                              partial(detector.backend, self.deps)))
        return found

    def close(self) -> None:
        """Release the backend and the entity recognizer (after the checks running finish).

        Once: a second call (``with`` after an explicit ``close``) does nothing.
        """
        with self._pool_lock:
            if self._closed:
                return
            self._closed = True
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
        self._ner.close()
        self._kept.close()  # each plan's detectors, and so their own servers
        self._endpoints.close()
        self.backend.close()

    def __enter__(self) -> Self:
        """``with Checker(...) as checker:`` closes it when the block ends, however it ends."""
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """Close the checker; an error from the block goes on as it was."""
        self.close()

    def _refuse_if_response_cannot_fit(self, response: str) -> None:
        """A long source is read in windows; the response is never cut, so it must fit."""
        window = self.backend.capabilities.context_window
        if window is None:
            return
        lower_bound = at_least_tokens(len(response)) + _PROMPT_OVERHEAD_TOKENS + MIN_WINDOW_TOKENS
        if lower_bound > window:
            raise ContextOverflowError(
                f"the response needs at least ~{int(lower_bound):,} tokens with the prompt and "
                f"a source window, but {self.backend.name} holds {window:,}; nothing was "
                "checked and nothing was truncated. Shorten the response or use a larger context."
            )


def check(
    source: Source,
    response: str,
    settings: Settings | None = None,
    *,
    question: str | None = None,
    points: object = None,
) -> CheckResult:
    """One-shot convenience: build a checker, check one pair, release the backend.

    ``question`` and ``points`` (what the response must cover) as ``Checker.check`` takes them.
    """
    with Checker(settings) as checker:
        return checker.check(source, response, question=question, points=points)


def score(
    pairs: Iterable[Pair],
    settings: Settings | None = None,
    *,
    threshold: float | None = None,
    max_concurrency: int | None = None,
    progress: ProgressChoice = None,
) -> PairResults:
    """Detect only (no rewrite, no judge) on every pair, with a checker built for this call.

    For rewrites and judge scores, or to keep the model loaded across calls, use
    ``Checker(settings).check_many(pairs)``. One pair given in place of the list
    (``score((source, response))``) is a ``TypeError``, raised before any model loads.
    """
    given = pairs_of(pairs)  # a call's mistake fails before any model is loaded
    with Checker(plan_for(settings, "check")) as checker:
        return checker.check_many(given, threshold=threshold, max_concurrency=max_concurrency,
                                  progress=progress)
