"""Chain-of-thought NLI as two detectors: each sentence, then the entities of passed ones.

``sentence_nli`` judges every claim the earlier detectors have not settled. ``entity_nli``
re-checks the sentences ``sentence_nli`` passed, one tagged entity at a time, by default
only the entities the source does not state word for word; without a ``sentence_nli``
judgement (the entity-only ablation) it re-checks every entity of every unsettled claim.
The English spaCy NER does not read text in another language: the entity level skips each
sentence written in one (each sentence is read in its own language, ``language_of_claim``),
and a note in the result names the sentence (in the ablation that claim is unverified).
"""

from __future__ import annotations

from conli.agents.nli import Hypothesis, run_nli, tag_entity
from conli.detectors.base import Detection, DetectionContext, skipped_for_sentence
from conli.models import Judgement
from conli.ner.claims import reads_names
from conli.ner.grounding import mentions_of
from conli.text.language import language_of_claim
from conli.text.segment import Segment


class SentenceNLI:
    """CoNLI's sentence level: whether the source entails the whole sentence."""

    name = "sentence_nli"
    supersedes: frozenset[str] = frozenset({"signals"})  # the hybrid's second opinion decides

    def detect(self, context: DetectionContext) -> Detection:
        """One NLI judgement for each unsettled claim."""
        claims = context.unsettled
        hypotheses = [Hypothesis(s.index, s.text) for s in claims]
        deps = context.deps
        judgements, calls = run_nli(deps.backend, context.source, hypotheses, kind="sentence",
                                    settings=deps.settings, detector=self.name,
                                    question=context.question)
        return Detection(
            judgements={h.sentence: [j] for h, j in zip(hypotheses, judgements, strict=True)},
            calls=calls,
        )


class EntityNLI:
    """CoNLI's entity level: whether the source supports each entity of a passed sentence."""

    name = "entity_nli"
    supersedes: frozenset[str] = frozenset({"signals"})

    def detect(self, context: DetectionContext) -> Detection:
        """Entities of the sentences to re-check, and one NLI judgement per unmatched one."""
        deps = context.deps
        candidates = context.unsettled
        sentence_level = any(context.judged(s.index, SentenceNLI.name) for s in candidates)
        found = Detection()
        candidates = self._readable(context, candidates, sentence_level, found)
        passed = [
            s for s in candidates
            if not sentence_level
            or any(j.verdict == "supported" for j in context.judged(s.index, SentenceNLI.name))
        ]
        # without a sentence-level verdict, no entity has been in front of a judge yet
        recheck_all = deps.settings.entity_recheck == "all" or not sentence_level
        source = mentions_of(context.source)
        hypotheses = []
        for sentence in passed:
            tagged = deps.ner.entities(sentence.text)  # a NER that fails fails the check
            entities = [
                e.model_copy(update={"start": e.start + sentence.start,
                                     "end": e.end + sentence.start,
                                     "in_source": source.states(e.text, e.category)})
                for e in tagged
            ]
            found.entities[sentence.index] = entities
            # re-checked: what the source does not state word for word (as measured)
            hypotheses += [
                Hypothesis(sentence.index, tag_entity(sentence.text, e.start, e.end), entity)
                for e, entity in zip(tagged, entities, strict=True)
                if recheck_all or not source.mentions(e.text)
            ]
        judgements, found.calls = run_nli(deps.backend, context.source, hypotheses,
                                          kind="entity", settings=deps.settings,
                                          detector=self.name, question=context.question)
        for hypothesis, judgement in zip(hypotheses, judgements, strict=True):
            found.judgements.setdefault(hypothesis.sentence, []).append(judgement)
        if not sentence_level:  # the ablation: a claim with no entity passes, as in the paper
            for sentence in passed:
                found.judgements.setdefault(sentence.index, [_nothing_to_check(sentence.text)])
        return found


    def _readable(self, context: DetectionContext, candidates: list[Segment],
                  sentence_level: bool, found: Detection) -> list[Segment]:
        """The candidates whose language the NER reads; a note for each other one.

        Without a sentence verdict (the ablation) a sentence left out is unverified.
        """
        settings = context.deps.settings
        kept = []
        for sentence in candidates:
            read_in = language_of_claim(sentence.text, settings.language, context.language)
            if reads_names(settings.ner, read_in):
                kept.append(sentence)
                continue
            note = skipped_for_sentence(self.name, sentence.index, read_in)
            found.notes.append(note)
            if not sentence_level:  # the ablation: nothing else judges this claim
                found.judgements[sentence.index] = [Judgement(
                    detector=self.name, hypothesis=sentence.text, verdict="unverified",
                    error=note.message)]
        return kept


def _nothing_to_check(sentence: str) -> Judgement:
    return Judgement(detector=EntityNLI.name, hypothesis=sentence, verdict="supported",
                     reasoning="no entity to re-check (entity level only)")
