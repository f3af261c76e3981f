"""``recallkit schema``: the one schema of every output record (summary.json, ``fit --json``, the DataFrames)."""
from __future__ import annotations

import json
from typing import Optional

import typer

from recallkit.theory.errors import InputError

__all__ = ["register", "markdown"]


def register(app: typer.Typer) -> None:
    app.command("schema")(schema)


def schema(
    record: Optional[str] = typer.Argument(
        None, help="One record (CheckResult, CheckRow, ClaimRow, RunRow, BoundaryPointRow, FitDocument, Summary). "
                   "Default: all of them, each under $defs."),
    as_markdown: bool = typer.Option(False, "--markdown", help="A field table per record instead of JSON Schema."),
) -> None:
    """Print the JSON Schema (draft 2020-12) of recallkit's outputs: every field of summary.json, fit --json and
    the DataFrames of recallkit.fits() / recallkit.results(), with what it means, and the schema's version."""
    from recallkit.compare import schema as records  # pydantic, about 0.3 s

    names = {m.__name__: m for m in records.MODELS}
    if record is not None and record not in names:
        raise InputError(f"RECORD: expected one of {', '.join(names)}, got {record!r}")
    chosen = [names[record]] if record else list(records.MODELS)
    if as_markdown:
        typer.echo(markdown(chosen, records.SCHEMA_VERSION))
        return
    doc = records.json_schema(chosen)
    if record:
        doc = {**{k: v for k, v in doc.items() if k != "$defs"}, **doc["$defs"][record],
               "$defs": {k: v for k, v in doc["$defs"].items() if k != record}}
    typer.echo(json.dumps(doc, indent=1, sort_keys=False))


def _type_text(spec: dict) -> str:
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[-1]
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    if "const" in spec:
        return json.dumps(spec["const"])
    if "anyOf" in spec:
        return " | ".join(_type_text(s) for s in spec["anyOf"])
    kind = spec.get("type", "any")
    if kind == "array" and "prefixItems" in spec:
        return f"[{', '.join(_type_text(s) for s in spec['prefixItems'])}]"
    if kind == "array":
        return f"list of {_type_text(spec.get('items', {}))}"
    return str(kind)


def markdown(models: list, version: str) -> str:
    """One section per record: its description, then a table of its fields (name, type, meaning)."""
    out = [f"Schema version {version}. Printed by `recallkit schema --markdown`; the JSON Schema "
           f"itself by `recallkit schema`."]
    for model in models:
        spec = model.model_json_schema()
        out += ["", f"## {model.__name__}", "", " ".join((spec.get("description") or "").split()), "",
                "| field | type | meaning |", "|---|---|---|"]
        for name, field in spec.get("properties", {}).items():
            meaning = " ".join((field.get("description") or "").split()).replace("|", "\\|")
            if field.get("deprecated"):
                meaning = f"**deprecated** {meaning}"
            out.append(f"| `{name}` | {_type_text(field).replace('|', '/')} | {meaning} |")
    return "\n".join(out)
