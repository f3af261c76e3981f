"""The ``recallkit`` command: a thin typer layer over theory -> empirics -> compare -> reports.

Each stage's commands live in their own module (``cli_theory``, ``cli_train``, ...): the options and help,
importing no heavy library (sympy, numpy, scipy, matplotlib, torch), so that ``--help``, ``--version`` and a
usage error answer in the time typer takes to start. A command body imports what it runs when it runs: one
import of its ``cli_*_run`` module (fit, report, figures), of the module it calls, or a name of the lazy
``recallkit.theory`` package. ``tests/unit/test_imports.py`` checks it; ``benchmarks/cli_startup.py`` times it.
"""
from __future__ import annotations

import os
import sys

import typer

from recallkit import __version__
# the order of the commands in --help, not alphabetical (typer lists the theory group after the commands)
from recallkit import cli_theory, cli_train, cli_sweep, cli_fit, cli_report, cli_figures, cli_probe, cli_diff, cli_freeze, cli_experiments, cli_schema  # noqa: I001
from recallkit.interrupts import interrupt_message
from recallkit.registry import RegistryError
from recallkit.theory.errors import RecallkitError

app = typer.Typer(
    name="recallkit",
    help=(
        "Check the theory of factual recall in transformers against training runs.\n\n"
        "Stages: 'theory' (symbolic terms, phase regions, predicted slopes), "
        "'train'/'sweep'/'results' (torch runs at the predicted points, kept in a SQLite store), "
        "'fit' (exponents with confidence intervals and verdicts), 'report' (the PDF), "
        "'figures' (one experiment's figures for a paper), 'diff' (what changed between two stores)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help: paragraphs re-flowed to the terminal and no type after a flag (rich's panels kept a
    # docstring's line breaks and showed <bool> after every flag); and the help is built as text, so the
    # no-arguments error does not print it a second time while it is made
    rich_markup_mode=None,
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """Check the theory of factual recall in transformers against training runs."""
    # not an eager callback: that would print the version before the rest of the line is read, so
    # 'recallkit --version extra' would exit 0; here an unknown command has already failed
    if version:
        if ctx.invoked_subcommand is not None:
            ctx.fail(f"--version: takes no command, got {ctx.invoked_subcommand!r}")
        typer.echo(f"recallkit {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:  # 'recallkit --': arguments, but no command among them
        ctx.fail("no command given")
    _check_source_date_epoch()


def _check_source_date_epoch() -> None:
    """SOURCE_DATE_EPOCH checked before any command imports scipy: numpy's f2py, which scipy loads, parses it
    with int() at import and raises a traceback on anything else, a blank value included."""
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None:
        return
    if not raw.strip():
        del os.environ["SOURCE_DATE_EPOCH"]  # blank is unset to recallkit (reports.style), and so to numpy too
        return
    from recallkit.reports.style import source_date  # matplotlib (about 0.3 s): only when the variable is set

    source_date()


def _register() -> None:
    for module in (cli_theory, cli_train, cli_sweep, cli_fit, cli_report, cli_figures, cli_probe, cli_diff, cli_freeze, cli_experiments, cli_schema):
        module.register(app)


_register()


def _usage_line(exc: BaseException) -> str | None:
    """One line for a command-line usage error, or None when ``exc`` is not one.

    Duck-typed on purpose: typer bundles its own click (``typer._click``) in some releases and uses the
    separate ``click`` package in others, so matching either package's classes would break on the other.
    A usage error is an exception with an integer ``exit_code`` and a ``format_message()``."""
    if not callable(getattr(exc, "format_message", None)) or not isinstance(getattr(exc, "exit_code", None), int):
        return None
    message = " ".join(str(exc.format_message()).split()) or type(exc).__name__
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "recallkit"
    return f"error: {message} (see '{command} --help')"


def main() -> None:
    """Entry point: toolkit errors and usage errors are one line on stderr with exit 2; Ctrl-C is exit 130
    with a line saying what is kept; no traceback for any of them."""
    try:
        code = app(standalone_mode=False)
    except (RecallkitError, RegistryError) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo(interrupt_message(), err=True)
        sys.exit(130)
    except Exception as exc:
        if type(exc).__name__ == "Abort":  # click turns Ctrl-C into Abort
            typer.echo(interrupt_message(), err=True)
            sys.exit(130)
        if type(exc).__name__ == "NoArgsIsHelpError" and getattr(exc, "ctx", None) is not None:
            typer.echo(exc.ctx.get_help())
            typer.echo(f"error: no command given (see '{exc.ctx.command_path} --help')", err=True)
            sys.exit(2)
        line = _usage_line(exc)
        if line is None:
            raise
        typer.echo(line, err=True)
        sys.exit(2)
    if isinstance(code, int) and code != 0:
        if code == 130:
            typer.echo(interrupt_message(), err=True)
        sys.exit(code)


if __name__ == "__main__":
    main()
