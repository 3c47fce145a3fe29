"""Streamed checks in process: a checker on the rule model, and a text sent in pieces."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

from conli.backends.fake import ScriptedBackend
from conli.config import Settings
from conli.pipeline import Checker
from conli.streaming import DoneEvent, SentenceEvent
from tests.support.responders import rule_responder

DETECT = {"mitigate": False, "judge": False}


def _checker(settings: Settings, **backend: Any) -> tuple[Checker, ScriptedBackend]:
    model = ScriptedBackend(responder=rule_responder(bad=("Smith", "FALSE")), **backend)
    return Checker(settings.model_copy(update=DETECT), backend=model), model


async def _chunks(parts: list[str], pause: float = 0.0) -> AsyncIterator[str]:
    for part in parts:
        yield part
        await asyncio.sleep(pause)


async def _collect(events: AsyncIterator[SentenceEvent | DoneEvent]) -> list[Any]:
    return [event async for event in events]


def _pieces(text: str, rng: random.Random, longest: int) -> list[str]:
    """``text`` cut at random places into pieces of 1..``longest`` characters."""
    pieces, at = [], 0
    while at < len(text):
        size = rng.randint(1, longest)
        pieces.append(text[at : at + size])
        at += size
    return pieces
