"""Judge modes registered by name, and the one function every text's 1-5 score goes through.

Adding a judge mode is one class with ``name``, ``judge`` and ``unscored``
(``judges.base.JudgeMode``) and one ``register`` call, or an entry point in the
``conli.judge_modes`` group of an installed package; ``--judge-mode`` and
``CONLI_JUDGE_MODE`` then take its name. The built-in modes are ``grounded``, ``rubric`` and
``both`` (``judges.modes``), over the two judges (``judges.grounded``, ``judges.rubric``).

``judge_text`` (the graph's judge step) asks the configured mode, except where no judge
may score: a text the rewrite emptied is ``emptied``, never a 5; one none of whose
sentences could be checked, or with no sentence to check at all (headings only), is
``unverified`` in every mode (no judge is asked). Every result carries a ``JudgeAudit``
(``judges.audit``).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import entry_points

from conli.backends.base import Backend
from conli.config import Settings
from conli.errors import ConfigError
from conli.judges.audit import Provenance, audited
from conli.judges.base import Judged, JudgeMode, JudgeTask, Unscored, unscored_result
from conli.judges.grounded import nothing_checked
from conli.judges.modes import BUILT_IN
from conli.models import SentenceResult

EMPTIED = "the rewrite removed every sentence: nothing is left to score"
NOTHING_TO_CHECK = ("the text has no sentence to check (only headings, list markers or "
                    "fragments), so there is no verdict to score from")

_REGISTRY: dict[str, JudgeMode] = {}
_LOADED_ENTRY_POINTS = False


def register(name: str, mode: JudgeMode) -> None:
    """Make ``mode`` the judge mode called ``name`` (``--judge-mode name``)."""
    _REGISTRY[name] = mode


def names() -> list[str]:
    """Every registered judge mode's name, sorted."""
    _load_entry_points()
    return sorted(_REGISTRY)


def get(name: str) -> JudgeMode:
    """The judge mode called ``name``; ``ConfigError`` naming the registered ones if none is."""
    _load_entry_points()
    if name not in _REGISTRY:
        raise ConfigError(f"invalid setting: judge_mode: unknown judge mode {name!r}; "
                          f"registered: {', '.join(names())}")
    return _REGISTRY[name]


def judge_text(backend: Backend, source: str, text: str, sentences: Sequence[SentenceResult],
               settings: Settings, provenance: Provenance) -> Judged:
    """Score ``text`` (whose checked ``sentences`` detection judged) in ``judge_mode``."""
    mode = get(settings.judge_mode)
    task = JudgeTask(backend, source, text, sentences, settings)
    if not text.strip():
        return audited(mode.unscored(task, "emptied", EMPTIED), text, sentences, provenance), []
    why = nothing_checked(sentences) or (
        None if any(s.checked for s in sentences) else NOTHING_TO_CHECK)
    if why:
        return audited(mode.unscored(task, "unverified", why), text, sentences, provenance), []
    result, calls = mode.judge(task)
    return audited(result, text, sentences, provenance), calls


def _load_entry_points() -> None:
    """Register judge modes installed packages declare in the ``conli.judge_modes`` group."""
    global _LOADED_ENTRY_POINTS
    if _LOADED_ENTRY_POINTS:
        return
    _LOADED_ENTRY_POINTS = True
    for point in entry_points(group="conli.judge_modes"):
        if point.name not in _REGISTRY:
            loaded = point.load()
            register(point.name, loaded() if isinstance(loaded, type) else loaded)


for _builtin in BUILT_IN:
    register(_builtin.name, _builtin)


__all__ = ["JudgeMode", "JudgeTask", "Judged", "Provenance", "Unscored", "get", "judge_text",
           "names", "register", "unscored_result"]
