"""`kmirror schema`: write the JSON Schema of kmirror.yaml; `--check` fails when the file on disk is stale."""

from __future__ import annotations

from pathlib import Path

import click

from reconciler.errors import KmirrorError
from reconciler.spec.schema import SCHEMA_PATH, schema_text


@click.command("schema")
@click.option(
    "-o",
    "--output",
    default=SCHEMA_PATH,
    show_default=True,
    help="Where to write the schema; '-' prints it.",
)
@click.option("--check", is_flag=True, help="Do not write; exit 1 if the file differs from the models.")
def schema(output: str, check: bool) -> None:
    """Generate the JSON Schema editors use to complete and check kmirror.yaml.

    \b
    Examples:
      kmirror schema -o kmirror.schema.json   # then, first line of kmirror.yaml:
                                              # yaml-language-server: $schema=kmirror.schema.json
      kmirror schema -o - | jq '.properties | keys'
      kmirror schema --check                  # CI: the committed schema matches the models
    """
    text = schema_text()
    if output == "-":
        click.echo(text, nl=False)
        return
    path = Path(output)
    if check:
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            raise KmirrorError(f"{path} does not exist (run 'kmirror schema' and commit the file)") from None
        if current != text:
            raise KmirrorError(f"{path} is stale: the models changed (run 'kmirror schema' and commit the file)")
        click.echo(f"{path} is up to date.")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    click.echo(f"Wrote {path}.")
