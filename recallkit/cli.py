"""The ``recallkit`` command: a thin typer layer over theory -> empirics -> compare -> reports.

Each stage's commands live in their own module (``cli_theory``, ``cli_train``, ...), which
imports heavy libraries (torch, matplotlib) only inside the command bodies so that
``recallkit --help`` stays fast.
"""
from __future__ import annotations

import sys
from typing import Optional

import typer

from recallkit import __version__

app = typer.Typer(
    name="recallkit",
    help=(
        "Check the theory of factual recall in transformers against training runs.\n\n"
        "Stages: 'theory' (symbolic terms, phase regions, predicted slopes), "
        "'train'/'sweep'/'results' (torch runs at the predicted points, kept in a SQLite store), "
        "'fit' (exponents with confidence intervals and verdicts), 'report' (the PDF)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"recallkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Check the theory of factual recall in transformers against training runs."""


def _register() -> None:
    from recallkit import cli_fit, cli_probe, cli_report, cli_sweep, cli_theory, cli_train

    for module in (cli_theory, cli_train, cli_sweep, cli_fit, cli_report, cli_probe):
        module.register(app)


_register()


def main() -> None:
    """Entry point: run the app, turning toolkit errors into one-line messages (exit 2)."""
    from recallkit.theory.errors import RecallkitError

    try:
        app(standalone_mode=False)
    except RecallkitError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (typer.Exit,) as exc:  # pragma: no cover - typer internals
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors etc.
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            typer.echo("aborted", err=True)
            sys.exit(1)
        raise


if __name__ == "__main__":
    main()
