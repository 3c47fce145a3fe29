"""A model that reads only the window of the source it was shown: a source longer than the
context, cut into windows."""

import json
import re

from conli.backends.fake import ScriptedBackend
from tests.support.responders import claims_of, nli_answer

FIRST, LAST = "The bridge opened in 1998.", "The mayor cut the ribbon."
SOURCE_TAG = re.compile(r"<source>\n(.*?)\n</source>", re.DOTALL)


def source_of(messages) -> str:
    return SOURCE_TAG.findall(messages[-1]["content"])[-1]


def reading_model(context_window: int = 2000) -> ScriptedBackend:
    """Entailment exactly when the claim is written in the source it was shown."""

    def respond(messages):
        if "fact checker" in messages[0]["content"]:
            source = source_of(messages)
            return nli_answer(["entailment" if c in source else "neutral"
                               for c in claims_of(messages)], messages)
        score = 5 if FIRST in source_of(messages) else 2
        return json.dumps({"errors": [], "score": score})

    return ScriptedBackend(responder=respond, context_window=context_window)
