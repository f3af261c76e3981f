"""``recallkit train``: train one model of a task and print its metrics."""
from __future__ import annotations

import dataclasses
import re
from typing import List, Optional

import typer

# the theory package loads theory.expr (sympy, about 0.3 s) on first use: when --set values are read, not for --help
from recallkit import registry, theory
from recallkit.cli_output import json_text, nonfinite_metrics
from recallkit.cli_sweep import MAX_THREADS
from recallkit.empirics import cost
from recallkit.empirics.config import config_hash, parse_config, task_spec
from recallkit.empirics.device import resolve_device
from recallkit.theory.errors import InputError, WorkFailed

__all__ = ["parse_set_options", "register"]


_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_set_options(items: list[str]) -> dict:
    """``["V=512", "gamma=1e7", "features=relu_centred"]`` -> dict; numbers become int/float, the rest stay strings.

    Strings are expressions or names: the run config parses expressions with recallkit's one
    whitelist parser (``theory.expr``) and evaluates them in guarded floats, so ``gamma=V**V**V``
    is a one-line error, never a huge integer. Numbers get the same digit limit as expressions.
    """
    values: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key or not text:
            raise InputError(f"--set {item!r}: expected key=value, e.g. --set V=512")
        if key in values:
            raise InputError(f"--set {key}: given twice")
        limit = theory.expr.MAX_NUMBER_DIGITS
        if (_INT.match(text) or _FLOAT.match(text)) and sum(ch.isdigit() for ch in text) > limit:
            raise InputError(f"--set {key}: number with more than {limit} digits")
        if _INT.match(text):
            values[key] = int(text)
        elif _FLOAT.match(text):
            values[key] = float(text)
        elif text.lower() in ("none", "null"):
            values[key] = None
        else:
            values[key] = text  # an expression or a name; the config validates it
    return values


def keep_names(values: dict, task: str) -> dict:
    """``--set KEY=none`` reads as None (an unset number, e.g. ``early_stop=none``) except where KEY is a name-valued
    option of the task's config (its default is a name, e.g. token retrieval's ``centring``), where ``none`` is the
    name itself."""
    try:
        named = {f.name for f in dataclasses.fields(task_spec(task).config_class()) if isinstance(f.default, str)}
    except (InputError, registry.RegistryError, TypeError):  # an unknown task: parse_config names it
        return values
    return {key: "none" if value is None and key in named else value for key, value in values.items()}


def _task_help() -> tuple[str, str, str]:
    """(task, model, trainer) help texts from the registered systems' tasks (read, never hard-coded)."""
    try:
        specs = list(registry.tasks().values())
    except registry.RegistryError as exc:  # a broken plug-in must not break --help
        return (f"a registered task ({exc})", "the task's model", "three_step | adam | adamw")
    models = "; ".join(f"{t.name}: {' | '.join(t.config_class().MODELS)}" for t in specs)
    # each task's own list, so a trainer a plug-in system registers (a closed form, say) is named with its task
    trainers = "; ".join(f"{t.name}: {' | '.join(t.trainers)}" for t in specs)
    return " | ".join(t.name for t in specs), models, trainers


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    task_help, model_help, trainer_help = _task_help()

    @app.command("train")
    def train(
        task: str = typer.Argument(..., help=task_help),
        model: str = typer.Option(..., "--model", help=model_help),
        trainer: str = typer.Option(..., "--trainer", help=trainer_help),
        settings: Optional[List[str]] = typer.Option(None, "--set", help="key=value, repeatable: sizes (V N d L m R), eta, gamma or kappa, fit_lr, fit_steps, fit_tol, lr, epochs, steps, batch_size, early_stop, features, mlp_input, n_eval"),
        seed: int = typer.Option(0, "--seed", help="seed of the task instance, samples and initial weights"),
        device: str = typer.Option("auto", "--device", help="auto (cuda if available, else cpu) | cpu | cuda"),
        threads: int = typer.Option(1, "--threads", min=1, max=MAX_THREADS, help="torch CPU threads (default 1, as sweep and report use, so the same config gives the same numbers); recorded in the output"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON document (config, hash, metrics) on stdout"),
        max_cost: Optional[str] = typer.Option(None, "--max-cost", help=cost.MAX_COST_HELP),
    ) -> None:
        """Train one model and print its accuracy (fresh samples), training accuracy and parameter count."""
        limit = cost.max_cost_allowed(max_cost)
        values = keep_names(parse_set_options(settings or []), task)
        for key in ("task", "model", "trainer", "seed"):
            if key in values:
                raise InputError(f"--set {key}: give it as {'an argument' if key == 'task' else '--' + key}, not --set")
        config = parse_config({"task": task, "model": model, "trainer": trainer, "seed": seed, **values}, where="recallkit train")

        # torch (about 1 s to import) only once a model is trained: the engine imports it too
        import torch

        from recallkit.empirics.engine import run_config  # imports torch (about 1 s), as above

        # checked against memory and priced before anything is built (a model that cannot fit is refused
        # whatever --max-cost says, so memory first); a long run says so, never silent
        target = resolve_device(device)
        cost.check_free_memory([config], target)
        work = cost.estimate([config], target)
        cost.refuse_above(work, limit, "recallkit train")
        if work.seconds >= cost.NOTE_SECONDS:
            typer.echo(f"recallkit train: estimated {work.describe()}, under the {cost.format_duration(limit)} limit",
                       err=True)
        torch.set_num_threads(threads)
        metrics = run_config(config, device=device)
        _print_run(task, model, trainer, config, metrics, as_json)
        bad = nonfinite_metrics(metrics)
        if bad:  # exit 3 after the metrics: the run diverged or overflowed (a NaN or an infinity is no measurement)
            raise WorkFailed("1 of 1 runs failed: it gave non-finite metrics ("
                             + ", ".join(f"{k} {v}" for k, v in sorted(bad.items())) + ")")


def _print_run(task: str, model: str, trainer: str, config, metrics: dict, as_json: bool) -> None:
    """The run's metrics: one JSON document (a NaN or an infinity as null, with ``nonfinite`` saying which), or
    the table."""
    if as_json:
        typer.echo(json_text({"config": config.to_dict(), "config_hash": config_hash(config), **metrics},
                             sort_keys=True))
        return
    typer.echo(f"{task} / {model} / {trainer}  (config {config_hash(config)})")
    shown = ("accuracy", "train_accuracy", "attention_mass", "loss")
    # a task's own metrics (declared in its Task's run_metrics, e.g. a law's test_error) after the built-in ones
    own = tuple(k for k in getattr(registry.task(task), "run_metrics", ()) or () if k not in shown)
    for key in shown + own + ("param_count", "steps_run", "gamma_used", "wall_time_s", "device", "threads"):
        if key in metrics:
            value = metrics[key]
            typer.echo(f"  {key:15s} {value:.4g}" if isinstance(value, float) else f"  {key:15s} {value}")
