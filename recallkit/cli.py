"""The ``recallkit`` command: a thin typer layer over theory -> empirics -> compare -> reports.

Each stage's commands live in their own module (``cli_theory``, ``cli_train``, ...): the options and help,
importing no heavy library (sympy, numpy, scipy, matplotlib, torch), so that ``--help``, ``--version`` and a
usage error answer in the time typer takes to start. A command body imports what it runs when it runs: one
import of its ``cli_*_run`` module (fit, report, figures), of the module it calls, or a name of the lazy
``recallkit.theory`` package. ``tests/unit/test_imports.py`` checks it; ``benchmarks/cli_startup.py`` times it.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

import typer

from recallkit import __version__, cli_output
# the order of the commands in --help, not alphabetical (typer lists the theory group after the commands)
from recallkit import cli_theory, cli_train, cli_sweep, cli_fit, cli_report, cli_figures, cli_probe, cli_diff, cli_freeze, cli_experiments, cli_schema, cli_cache  # noqa: I001
from recallkit.env_check import check_environment
from recallkit.interrupts import interrupt_message
from recallkit.reports.dates import source_date  # no matplotlib: read before every command
from recallkit.registry import RegistryError
from recallkit.theory.errors import OutputError, RecallkitError, WorkFailed

# exit statuses, the same for every command (README.md, "Exit codes")
EXIT_OK, EXIT_FAIL_ON, EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

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
    check_environment()  # every RECALLKIT_* variable, whether this command reads it or not: a bad one fails now
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
    source_date()


def _register() -> None:
    for module in (cli_theory, cli_train, cli_sweep, cli_fit, cli_report, cli_figures, cli_probe, cli_diff, cli_freeze, cli_experiments, cli_schema, cli_cache):
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


def _error(line: str) -> None:
    """One line on stderr (a stderr that cannot be written either is left at that: the exit status says it)."""
    with contextlib.suppress(OSError, ValueError):
        typer.echo(line, err=True)


@contextlib.contextmanager
def _files_backend() -> Iterator[None]:
    """matplotlib draws into files here (Agg), whatever ``MPLBACKEND`` says: an invalid value raised a traceback
    at the first import of pyplot, and a GUI backend has nothing to show. Set before anything imports matplotlib,
    and for the worker processes a command starts (they inherit the variable); the library itself leaves the
    backend to its user (a notebook's inline one). The variable is put back after the command."""
    before = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None:  # imported before the command line ran (a test calling main): switched over
        with contextlib.suppress(Exception):
            matplotlib.use("Agg", force=True)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = before


def _run_app() -> int:
    """The command's exit status; toolkit, usage and output errors and Ctrl-C raise out of it (see main)."""
    with _files_backend(), cli_output.checked_stdout():
        code = app(standalone_mode=False)
    return code if isinstance(code, int) else EXIT_OK


def main() -> None:
    """Entry point, the same exit statuses for every command (README.md, "Exit codes"): 0 when everything asked
    for exists; 1 when a verdict matched --fail-on (or --require, or diff --exit-code found a difference); 2 for a
    usage or input error; 3 when asked-for work failed (a run raised or gave non-finite metrics) or an output
    could not be written; 130 when interrupted (with a line saying what is kept). Each error is one line on
    stderr, never a traceback, and nothing after it claims success."""
    try:
        code = _run_app()
    except (OutputError, WorkFailed) as exc:
        if isinstance(exc, cli_output.StdoutError):
            cli_output.discard_stdout()
        _error(f"error: {exc}")
        sys.exit(EXIT_FAILED)
    except (RecallkitError, RegistryError) as exc:
        _error(f"error: {exc}")
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        _error(interrupt_message())
        sys.exit(EXIT_INTERRUPTED)
    except OSError as exc:  # an output no part of the toolkit named (its own writes are OutputErrors)
        _error(f"error: {_os_error_line(exc)}")
        sys.exit(EXIT_FAILED)
    except Exception as exc:
        if type(exc).__name__ == "Abort":  # click turns Ctrl-C into Abort
            _error(interrupt_message())
            sys.exit(EXIT_INTERRUPTED)
        if type(exc).__name__ == "NoArgsIsHelpError" and getattr(exc, "ctx", None) is not None:
            with contextlib.suppress(OSError):
                typer.echo(exc.ctx.get_help())
            _error(f"error: no command given (see '{exc.ctx.command_path} --help')")
            sys.exit(EXIT_USAGE)
        line = _usage_line(exc)
        if line is None:
            raise
        _error(line)
        sys.exit(EXIT_USAGE)
    if code != EXIT_OK:
        if code == EXIT_INTERRUPTED:
            _error(interrupt_message())
        sys.exit(code)


def _os_error_line(exc: OSError) -> str:
    """``cannot write PATH: reason`` for an OSError that escaped a command (its file, when it names one)."""
    names = [str(name) for name in (exc.filename2, exc.filename) if name]
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{names[0]}: {reason}" if names else reason


if __name__ == "__main__":
    main()
