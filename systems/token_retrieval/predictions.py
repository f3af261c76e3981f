"""Where token retrieval's tested predictions come from (the registry's ``prediction_source``; DERIVATION.md §11.8).

A tested prediction's inputs are a priori (the pack, the run config, the derivation), a calibration (a constant
measured on named runs) or conditional (a measured quantity of the judged runs). :data:`PREDICTION_SOURCE` answers
compare's three questions about a pack from what ``finite_size`` declares:

* ``finite_size.FINITE_SIZE_FORM``: the one finite-size treatment of the system (the argmax over V labels at the check's
  level, every term's normalisers at their exact finite-L values), the packs it covers, and the presets of
  ``tr_fig2_attention_only`` on whose runs it was chosen (verdicts on those presets are exploratory);
* ``finite_size.PROBED_CONSTANTS_CALIBRATION``: the runs on which ``finite_size.PROBED_CONSTANTS`` (the all-terms form's
  constants) were measured;
* ``finite_size.all_terms_accuracy``: the all-terms form's own accuracy at the ceiling size (an a priori ceiling).

Importing it imports ``finite_size`` (numpy, scipy and sympy; no torch): compare loads it, through the registry, only
where it computes a prediction with the system's finite-size form, which imports ``finite_size`` anyway; a report whose
predictions are all cached loads neither.
"""
from __future__ import annotations

from typing import Any, Mapping

from recallkit.systems.token_retrieval.finite_size import (ALL_TERMS_CONSTANTS, FINITE_SIZE_FORM, PROBED_CONSTANTS,
                                                           PROBED_CONSTANTS_CALIBRATION, all_terms_accuracy)


class TokenRetrievalPredictions:
    """The prediction source of the token-retrieval system (its ``recallkit_prediction_source`` hook): for a pack, the
    finite-size form its tested prediction takes, the calibrations of the constants that prediction uses, and the
    form's own ceiling (the accuracy at the ceiling size), so that a fraction of the ceiling has an a priori level."""

    def form(self, pack: str) -> dict[str, Any] | None:
        """``{"name", "covers", "selected_on", "derivation"}`` of ``finite_size.FINITE_SIZE_FORM`` when it covers
        ``pack``, else None."""
        form = FINITE_SIZE_FORM
        if pack not in form.covers:
            return None
        return {"name": form.name, "covers": list(form.covers), "selected_on": list(form.selected_on),
                "selected_experiment": form.selected_experiment, "derivation": form.derivation}

    def calibrations(self, pack: str) -> list[dict[str, Any]]:
        """The calibration records of the constants ``pack``'s tested prediction uses: the probed constants'
        (``finite_size.PROBED_CONSTANTS_CALIBRATION``) for a pack whose all-terms form takes them
        (``finite_size.ALL_TERMS_CONSTANTS``: the attention-only pack), none otherwise (the binding terms' finite-size form
        has no measured constant)."""
        if ALL_TERMS_CONSTANTS.get(pack) is PROBED_CONSTANTS:
            return [PROBED_CONSTANTS_CALIBRATION.to_dict()]
        return []

    def ceiling(self, pack: str, finite_size: Mapping[str, Any], sizes: Mapping[int, float]
                ) -> dict[int, float] | None:
        """The accuracy the all-terms form gives at the ceiling size ``sizes[V]`` of each realised row of
        ``finite_size`` (``finite_size.all_terms_accuracy``); None for a pack without an all-terms form (the caller then
        keeps the measured ceiling, a conditional input)."""
        return all_terms_accuracy(pack, finite_size, sizes)


PREDICTION_SOURCE = TokenRetrievalPredictions()
