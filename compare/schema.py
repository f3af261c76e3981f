"""The one output schema: every record recallkit writes for a reader, typed, documented field by field.

A check's result is one record, :class:`CheckResult`: the same in ``recallkit fit --json`` (its ``fits``), in
summary.json (each experiment's ``fits``) and in the pytest plugin's messages. Its flat view,
:class:`CheckRow`, is summary.json's ``entries`` row of a fitted check and, with every interval split into
``_lo`` / ``_hi`` columns (:func:`flat_columns`), the DataFrame of ``recallkit.fits()``. The results of
``recallkit.results()`` are :class:`RunRow` (one stored run) and :class:`BoundaryPointRow` (one answer of a
search). :class:`FitDocument` is ``fit --json``, :class:`Summary` is summary.json. ``recallkit schema`` prints
all of them as one JSON Schema (draft 2020-12).

Slopes are named for what they are: ``predicted_slope_asymptotic`` is the theory's exponent as the sizes grow,
``predicted_slope_tested`` the one the verdict compared (the asymptotic one, or its finite-range or finite-size
reading over the fitted range, named in ``prediction_compared``), ``predicted_slope_conditional`` the reading
that uses the judged runs' own measurements (never the verdict's). Versioning: ``SCHEMA_VERSION`` is
MAJOR.MINOR; a renamed field keeps its old name, marked deprecated, for one minor version
(:data:`DEPRECATED_ALIASES`), and readers of summaries (``recallkit diff``) accept the previous version.
"""
from __future__ import annotations

from typing import Any, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from recallkit.theory.errors import InputError

__all__ = ["BoundaryPointRow", "CheckResult", "CheckRow", "ClaimRow", "DEPRECATED_ALIASES", "FitDocument",
           "READABLE_SUMMARY_SCHEMAS", "RunRow", "SCHEMA_VERSION", "SUMMARY_SCHEMA", "FIT_SCHEMA", "Summary",
           "check_row", "flat_columns", "flat_row", "json_schema", "tested_and_asymptotic", "upgrade_check",
           "upgrade_summary", "with_aliases"]

SCHEMA_VERSION = "1.1"
SUMMARY_SCHEMA = f"recallkit.summary/{SCHEMA_VERSION}"
FIT_SCHEMA = f"recallkit.fit/{SCHEMA_VERSION}"
# summary.json documents this version reads: its own and the previous one (1: before the slopes were named)
READABLE_SUMMARY_SCHEMAS = ("recallkit.summary/1", SUMMARY_SCHEMA)
# old name -> the field it was renamed to; written beside the new one in 1.1, gone in 1.2
DEPRECATED_ALIASES = {"predicted_slope": "predicted_slope_tested",
                      "predicted_slope_finite_range": "predicted_slope_tested"}

VerdictName = Literal["consistent", "inconsistent", "inconclusive"]
EvidenceLabel = Literal["confirmatory", "conditional", "exploratory"]
Pair = tuple[float | None, float | None]  # an interval [lo, hi]; an end that is not finite is null


def _f(description: str, **kw: Any) -> Any:
    return Field(default=None, description=description, **kw)


class _Record(BaseModel):
    # extra fields are read, never refused (a newer writer, a plug-in system's own numbers); the tests check that
    # shipped outputs hold none that this schema does not name
    model_config = ConfigDict(extra="allow")


class _CheckFields(_Record):
    """The fields a check's record and its flat row share."""

    experiment: str = Field(description="Experiment name (the experiment file's stem).")
    line: str | None = _f("The line's label, its scaling as written in the experiment file (e.g. N=V**1.5, "
                          "L=V**0.5), or its name.")
    threshold: float | None = _f("Accuracy (or metric) threshold of the check; null for a law's check.")
    threshold_relative: bool = Field(False, description="The threshold is a fraction of each instance's ceiling "
                                                         "(printed '0.5 x ceiling').")
    kind: str | None = _f("'law' for a law's check (metric against a variable); absent for a size-threshold check.")
    x: str | None = _f("The regressor, e.g. 'log V' or 'log(N ln N)' (capacity).")
    slope: float | None = _f("Fitted slope of log(param_count) (or of log(metric) for a law) on x; null when too "
                             "few points were fitted.")
    slope_ci: Pair | None = _f("(1 - alpha) HC3 Student-t interval of the slope; the interval the 'inconsistent' "
                               "verdict reads.")
    slope_ci_bootstrap: Pair | None = _f("(1 - alpha) percentile interval of the slope, resampling seeds.")
    predicted_slope_tested: float | None = _f("The predicted slope the verdict compared: the asymptotic slope, or "
                                              "its finite-range or finite-size reading (see prediction_compared).")
    predicted_slope_asymptotic: float | None = _f("The theory's asymptotic exponent along the line.")
    predicted_slope_conditional: float | None = _f(
        "The prediction read with the judged runs' own measurements (their attention, their ceilings); reported "
        "beside the verdict, never tested by it.")
    prediction_compared: str | None = _f("Which reading predicted_slope_tested is: 'finite size', 'realised grid', "
                                         "'all terms', or absent for the asymptotic slope (finite-range where "
                                         "log_power is not 0).")
    log_power: str | float | None = _f("Power of log(base) in the prediction, e.g. '1' or '1/2'.")
    delta: float | None = _f("Equivalence margin: the band is predicted_slope_tested +- delta.")
    alpha: float | None = _f("Test level (TOST at alpha; two-sided (1 - alpha) interval).")
    band: Pair | None = _f("The equivalence band [predicted_slope_tested - delta, predicted_slope_tested + delta].")
    p_tost: float | None = _f("The larger one-sided p-value of the two one-sided tests.")
    verdict: VerdictName = Field(description="consistent: the (1 - 2 alpha) interval lies inside the band; "
                                             "inconsistent: the (1 - alpha) interval lies outside it; otherwise "
                                             "inconclusive.")
    verdict_reason: str | None = _f("One line: the numbers that decided the verdict.")
    decided_by: str | None = _f("Who decided the verdict, where not the generic slope test (e.g. a system's judge).")
    verdict_conditional: VerdictName | None = _f("The verdict against predicted_slope_conditional (reported only).")
    evidence: EvidenceLabel | None = _f(
        "What the verdict is worth: confirmatory (a prediction frozen before its runs, read a priori), conditional "
        "(it reads a measurement of the judged runs), exploratory (no freeze, or its form was chosen on these "
        "runs). Null for checks without a tested prediction.")
    evidence_reason: str | None = _f("One line: why the evidence label.")
    conditional_on: list[str] | None = _f("The judged runs' measurements a conditional prediction reads.")
    freeze: str | None = _f("SHA-256 (first 12 hex digits) of the freeze that held this check's prediction.")
    primary: bool | None = _f("This threshold is the line's primary check (declared in the experiment file).")
    n_points: int | None = _f("Boundary points fitted.")
    C: float | None = _f("Capacity constant: param_count = C N ln N where x is log(N ln N), C N where x is log N "
                         "(capacity experiments).")
    C_ci: Pair | None = _f("(1 - alpha) interval of C.")
    metric: str | None = _f("A law's metric (e.g. test_error) or a threshold's metric where not accuracy.")
    variable: str | None = _f("A law's base variable (its x is log of it).")
    law: str | None = _f("A law's name in its pack.")
    direction: str | None = _f("A law's direction: whether the metric falls or rises with the variable.")
    # the other readings of the prediction, kept beside the tested one for the reader
    predicted_slope_realised: float | None = _f("Prediction at the sizes actually run (floored counts, log factors).")
    predicted_slope_finite_size: float | None = _f("Prediction with each term in its finite-size form.")
    predicted_slope_all_terms: float | None = _f("Prediction from every term of the accuracy, not its dominant one.")
    predicted_slope_all_terms_gaussian_counts: float | None = _f("predicted_slope_all_terms with Gaussian counts.")
    predicted_slope_within_ceiling: float | None = _f("Prediction as if the ceiling were a cap (reported only).")
    verdict_within_ceiling: VerdictName | None = _f("The verdict against predicted_slope_within_ceiling (reported).")
    verdict_binding_terms: VerdictName | None = _f("The verdict against the binding terms' prediction (reported).")
    verdict_asymptotic: VerdictName | None = _f("The verdict against predicted_slope_asymptotic (reported).")
    prediction_note: str | None = _f("A note on how the tested prediction was read.")
    method: str | None = _f("'curve' when the boundary was read from seed-mean curves; absent for a bisection.")
    dominant: str | None = _f("The term that dominates along the line (a law's).")
    # deprecated names (schema 1); the same number as the field they were renamed to
    predicted_slope: float | None = _f("Deprecated (schema 1.0 name): predicted_slope_tested.", deprecated=True)
    predicted_slope_finite_range: float | None = _f("Deprecated (schema 1.0 name): predicted_slope_tested.",
                                                    deprecated=True)


class CheckResult(_CheckFields):
    """One check's result: a fitted line of one experiment (line x threshold, or a law's metric against its
    variable), the prediction it was tested against, its verdict and what the verdict is worth."""

    y: str | None = _f("The regressand, 'log(param_count)' or log of a law's metric.")
    slope_se: float | None = _f("HC3 standard error of the slope.")
    slope_ci_tost: Pair | None = _f("(1 - 2 alpha) interval: the one TOST reads for 'consistent'.")
    bootstrap: dict[str, Any] | None = _f("The bootstrap's settings and notes (resamples, seed, units).")
    intercept: float | None = _f("Fitted intercept.")
    intercept_ci: Pair | None = _f("(1 - alpha) interval of the intercept.")
    confidence_band: Any = _f("Pointwise confidence band of the fitted line, for drawing.")
    r2: float | None = _f("R^2 of the fit.")
    n_seeds: int | None = _f("Seeds among the fitted points.")
    df_resid: float | None = _f("Residual degrees of freedom.")
    censored: list[dict[str, Any]] = Field(default_factory=list,
                                           description="Points not fitted, each with its censor_reason.")
    points: list[dict[str, Any]] = Field(default_factory=list, description="The fitted boundary points.")
    slope_reverse_regression: float | None = _f("Capacity fits: slope / R^2 of the reverse regression (reported).")
    C_ci_bootstrap: Pair | None = _f("Bootstrap interval of C.")
    C_fixed_slope: float | None = _f("The slope held fixed when C was fitted.")
    tested_prediction: dict[str, Any] | None = _f(
        "The tested prediction: its number, form, inputs (each with where it came from) and the presets its form "
        "was selected on.")
    verdict_reason_asymptotic: str | None = _f("Reason of verdict_asymptotic.")
    predicted_realised_terms: Any = _f("The terms of the realised-grid prediction.")
    finite_size_constants: Any = _f("The constants the finite-size prediction used, per run.")
    predicted_slope_all_terms_reached_bases: float | None = _f(
        "predicted_slope_all_terms over the base values the runs reached (reported only).")
    unreached: Any = _f("Base values whose runs never reached the threshold (named, never dropped).")
    censored_against_all_terms: Any = _f("Points censored against the all-terms prediction's bounds.")
    ceilings: dict[str, Any] | None = _f("Seed-mean accuracy ceiling per base value (curve method).")
    boundary_gap: float | None = _f("A law's distance from its phase boundary along the line.")
    boundary_warning: str | None = _f("A warning when a law's line sits near its phase boundary.")
    all_terms_d: Any = _f("The widths d the all-terms prediction was read at.")
    conditional_reading_on: list[str] | None = _f("The judged runs' measurements predicted_slope_conditional reads.")
    finite_size_at: Any = _f("The level each base value's finite-size prediction was read at, where the check is "
                             "tested at its own level.")


class CheckRow(_CheckFields):
    """The flat view of a check: summary.json's ``entries`` row of a fitted check, and (intervals split into
    _lo / _hi) one row of ``recallkit.fits()``."""

    slope_ci_tost: Pair | None = _f("(1 - 2 alpha) interval: the one TOST reads for 'consistent'.")
    n_seeds: int | None = _f("Seeds among the fitted points.")
    r2: float | None = _f("R^2 of the fit.")
    n_censored: int = Field(0, description="Points not fitted (censored).")
    check: int | None = _f("The check's number in the report (its entry in the appendix).")


class ClaimRow(_Record):
    """summary.json's ``entries`` row of a comparative claim (kind 'claim'): the difference of a statistic
    between two checks."""

    kind: Literal["claim"]
    experiment: str
    line: str = Field(description="'claim ID: the claim as written'.")
    threshold: float | None = None
    threshold_relative: bool = False
    x: str | None = None
    claim_id: str | None = None
    claim_text: str | None = None
    relation: str | None = _f("The claimed relation of A - B (e.g. '>', '<', '~').")
    side_a: str | None = None
    side_b: str | None = None
    difference: float | None = _f("The statistic of A minus that of B.")
    se: float | None = _f("Standard error of the difference.")
    df: float | None = _f("Degrees of freedom of the difference's t interval.")
    interval: Pair | None = _f("(1 - alpha) interval of the difference.")
    p: float | None = _f("p-value of the claim's test.")
    alpha: float | None = _f("Test level.")
    provenance: Any = _f("Where the claim comes from (paper-reported or derived-here).")
    dominant: str | None = _f("Empty for a claim.")
    verdict: VerdictName
    verdict_reason: str | None = None
    evidence: EvidenceLabel | None = _f("The weaker evidence label of the claim's two checks.")
    evidence_reason: str | None = None
    n_points: int | None = None
    n_censored: int | None = None
    check: int | None = _f("The check's number in the report.")


class RunRow(_Record):
    """One stored run, as ``recallkit.results()`` gives it: its provenance, then its config and metrics flattened
    into ``config.*`` and ``metrics.*`` columns."""

    config_hash: str = Field(description="SHA-256 of the run's config: the run's identity; trained once, reused.")
    experiment: str | None = _f("The experiment that first asked for the run.")
    seed: int | None = None
    accuracy: float | None = _f("Test accuracy of the trained model.")
    wall_time_s: float | None = None
    device: str | None = _f("cpu, cuda:0, ...")
    threads: int | None = _f("torch threads the run trained with.")
    torch_version: str | None = None
    code_version: str | None = _f("recallkit's code version that trained it.")
    created_at: str | None = None


class BoundaryPointRow(_Record):
    """One answer of a search (``recallkit.results(..., points=True)``): the smallest size of one line that
    reaches one threshold, for one seed and base value."""

    experiment: str
    line: str
    scaling: str | None = None
    threshold: float | None = None
    seed: int | None = _f("null for a curve search's seed-mean point.")
    base: str = Field(description="The line's base variable (e.g. V).")
    base_value: Any = None
    size: str = Field(description="The variable searched (e.g. N, d or m).")
    values: dict[str, Any] = Field(default_factory=dict, description="The point's experiment variables.")
    param_count: float | None = _f("The model's parameter count at the boundary.")
    metric: str = "accuracy"
    metric_value: float | None = None
    config_hash: str | None = None
    censored: bool = False
    censor_reason: str | None = None


class FitDocument(_Record):
    """``recallkit fit --json``: one experiment's checks, fitted from what the store holds."""

    schema_: str = Field(alias="schema", description=f"'{FIT_SCHEMA}'.")
    experiment: str
    path: str
    preset: str
    kind: str = Field(description="The experiment's kind (min_size, max_capacity, law, grid, ...).")
    store: str
    sweep: dict[str, Any] = Field(default_factory=dict, description="Runs reused, computed, missing; provenance.")
    method: dict[str, str] = Field(default_factory=dict, description="How the numbers were made, in words.")
    predictions: dict[str, Any] = Field(default_factory=dict, description="Each line's prediction.")
    fits: list[CheckResult]
    metric: str | None = _f("The metric the thresholds are on, where not accuracy.")
    line_metrics: dict[str, str] | None = _f("A line's own metric, where it has one.")
    law: dict[str, Any] | None = _f("A law experiment's law: name, metric, direction, variable.")
    claims: list[dict[str, Any]] | None = _f("The experiment's comparative claims, judged.")
    set: dict[str, Any] | None = _f("Fields of the experiment file this command changed (--set FIELD=VALUE).")


class ExperimentEntry(_Record):
    """One experiment of a report: what was run, its prediction and its checks; a system adds its own numbers
    beside these (its own kind of entry)."""

    name: str = Field(description="Experiment name.")
    title: str | None = _f("What the experiment reproduces, in words.")
    description: str | None = _f("The experiment file's description.")
    kind: str | None = _f("The experiment's kind (min_size, max_capacity, law, grid, or a system's own).")
    path: str | None = _f("The experiment file.")
    preset: str | None = None
    store: str | None = _f("The results store its runs were read from.")
    pack: Any = _f("The theorem pack its predictions come from (name and provenance).")
    reference: Any = _f("The paper it reproduces.")
    notes: Any = _f("Notes of the experiment file.")
    lines: Any = _f("Its lines: label, scaling and the line's own prediction.")
    predictions: Any = _f("Each line's prediction (slope, log power, dominant term, provenance).")
    terms: Any = _f("The pack's terms, with their provenance (paper-reported or derived-here).")
    regions: Any = _f("The phase regions drawn on its phase diagram.")
    phase_lines: Any = _f("The lines as drawn on the phase diagram.")
    method: Any = _f("How the numbers were made, in words.")
    config_hashes: list[str] | None = _f("SHA-256 of every run's config it read.")
    diagnostics: dict[str, int] | None = _f("What its checks rest on: runs, monotonicity violations along the searched "
                                            "size, points flagged by the training-budget check.")
    experiment: str | None = _f("Experiment name, as fit --json writes it.")
    schema_: str | None = Field(default=None, alias="schema", description=f"'{FIT_SCHEMA}' where the entry is a fit "
                                                                         f"document.")
    fits: list[CheckResult] = Field(default_factory=list, description="Its checks.")
    claims: list[dict[str, Any]] | None = _f("Its comparative claims, judged.")
    set: dict[str, Any] | None = _f("Fields of the experiment file this report changed (--set FIELD=VALUE).")


class Summary(_Record):
    """summary.json: the report's every check, with where its numbers came from."""

    schema_: str = Field(alias="schema", description=f"'{SUMMARY_SCHEMA}' ('recallkit.summary/1' is still read).")
    title: str | None = None
    subtitle: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    experiments: list[ExperimentEntry]
    failures: list[str] = Field(default_factory=list)
    entries: list[dict[str, Any]] = Field(
        default_factory=list, description="One flat row per check: a CheckRow for a fitted check, a ClaimRow for a "
                                          "claim, a system's own row (with its kind) otherwise.")
    evidence_counts: dict[str, Any] | None = _f("Checks per evidence label, primary checks apart.")
    run_wall_time_s: float | None = _f("Wall time of the report's runs and fits.")


# -- one way to make each view ------------------------------------------------------------------------------------

def with_aliases(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with each deprecated name written beside the field it was renamed to (schema 1.1)."""
    for old, new in DEPRECATED_ALIASES.items():
        record[old] = record.get(new)
    return record


_ROW_FIELDS = tuple(CheckRow.model_fields)


def check_row(fit: Mapping[str, Any], experiment: str | None = None, log_power: Any = None) -> dict[str, Any]:
    """The flat row (:class:`CheckRow`) of one check's record (:class:`CheckResult`, or a schema-1 fit dict)."""
    fit = upgrade_check(fit)
    row = {name: fit.get(name) for name in _ROW_FIELDS if name not in ("n_censored",)}
    row["experiment"] = experiment or fit.get("experiment")  # the entry's name: pages and counts find rows by it
    row["threshold_relative"] = bool(fit.get("threshold_relative"))
    if row.get("log_power") is None:
        row["log_power"] = log_power
    row["n_censored"] = len(fit.get("censored") or [])
    return with_aliases(row)


def upgrade_check(fit: Mapping[str, Any]) -> dict[str, Any]:
    """A check's record of schema 1 (``predicted_slope`` the given slope, ``predicted_slope_finite_range`` the
    compared one) with the names of this schema; a record of this schema unchanged."""
    fit = dict(fit)
    if fit.get("predicted_slope_tested") is None and "predicted_slope_finite_range" in fit:
        tested = fit.get("predicted_slope_finite_range")
        fit["predicted_slope_tested"] = fit.get("predicted_slope") if tested is None else tested
        if fit.get("predicted_slope_asymptotic") is None:
            fit["predicted_slope_asymptotic"] = fit.get("predicted_slope")
        with_aliases(fit)
    return fit


def tested_and_asymptotic(record: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(the predicted slope the verdict tested, the asymptotic one) of a check's record or row, of this schema or
    the previous; the asymptotic one is the tested one where the record has no other."""
    record = upgrade_check(record)
    tested, asymptotic = record.get("predicted_slope_tested"), record.get("predicted_slope_asymptotic")
    asymptotic = tested if asymptotic is None else asymptotic
    return (None if tested is None else float(tested)), (None if asymptotic is None else float(asymptotic))


def upgrade_summary(doc: Mapping[str, Any], where: str = "summary") -> dict[str, Any]:
    """A summary.json document of a readable schema version, with this version's field names."""
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    if schema not in READABLE_SUMMARY_SCHEMAS:
        raise InputError(f"{where}: schema: expected one of {', '.join(READABLE_SUMMARY_SCHEMAS)}, got {schema!r}")
    out = dict(doc)
    out["experiments"] = [dict(e, fits=[upgrade_check(f) for f in e.get("fits") or ()])
                          for e in doc.get("experiments") or ()]
    out["entries"] = [upgrade_check(r) for r in doc.get("entries") or ()]  # a row of this schema: unchanged
    return out


def flat_columns(model: type[BaseModel] = CheckRow) -> list[str]:
    """The DataFrame columns of ``model``'s rows: each interval field split into ``NAME_lo`` and ``NAME_hi``
    (:func:`flat_row`'s keys, in order)."""
    return list(flat_row({}, model))


def flat_row(row: Mapping[str, Any], model: type[BaseModel] = CheckRow) -> dict[str, Any]:
    """``row`` with its intervals split as :func:`flat_columns` names them."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        value = row.get(name)
        if info.annotation in (Pair, Pair | None):
            pair = value if isinstance(value, (list, tuple)) and len(value) == 2 else (None, None)
            out[f"{name}_lo"], out[f"{name}_hi"] = pair[0], pair[1]
        else:
            out[name] = value
    return out


MODELS: tuple[type[BaseModel], ...] = (CheckResult, CheckRow, ClaimRow, RunRow, BoundaryPointRow, FitDocument,
                                       Summary)


def json_schema(models: Iterable[type[BaseModel]] = MODELS) -> dict[str, Any]:
    """Every output record as one JSON Schema document (draft 2020-12), each record under ``$defs``."""
    _, doc = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:recallkit:schema:{SCHEMA_VERSION}",
            "title": f"recallkit output records, schema {SCHEMA_VERSION}",
            "description": __doc__.split("\n\n")[0].strip(),
            "version": SCHEMA_VERSION, **doc}
