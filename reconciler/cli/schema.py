"""`kmirror schema`: print the JSON Schema of kmirror.yaml (or, with --markdown, the reference page generated
from it) on stdout, or write it to `-o PATH`; `--check` fails when a file on disk is stale.

Writes nowhere unless told: `-o PATH` names the file. kmirror's own repository regenerates its copies with
`kmirror schema -o schemas/kmirror.schema.json` and `kmirror schema --markdown -o docs/reference.md`, and CI checks
them with `--check` (whose default paths are those two files).

Must not: write a file nobody named with `-o` (the working directory may be anyone's repository).
"""

from __future__ import annotations

from pathlib import Path

import click

from reconciler.errors import KmirrorError
from reconciler.spec.files import FileTooLarge, read_capped
from reconciler.spec.reference import REFERENCE_PATH, reference_markdown
from reconciler.spec.schema import SCHEMA_PATH, schema_text


@click.command("schema")
@click.option(
    "-o",
    "--output",
    default=None,
    metavar="PATH",
    help=f"Write to PATH instead of stdout ('-' is stdout). With --check: the file to compare "
    f"[default: {SCHEMA_PATH}, with --markdown {REFERENCE_PATH}].",
)
@click.option("--markdown", is_flag=True, help="The Markdown reference of every field instead of the JSON Schema.")
@click.option("--check", is_flag=True, help="Do not write; exit 1 if the file differs from the models.")
def schema(output: str | None, markdown: bool, check: bool) -> None:
    """Print the JSON Schema editors use to complete and check kmirror.yaml (or write it with -o).

    \b
    Examples:
      kmirror schema > kmirror.schema.json     # then, first line of kmirror.yaml:
                                               # yaml-language-server: $schema=kmirror.schema.json
      kmirror schema | jq '.properties | keys'
      kmirror schema --markdown -o docs/reference.md      # every field with type and default
      kmirror schema --check && kmirror schema --markdown --check   # kmirror's CI: both files are fresh
    """
    text = reference_markdown() if markdown else schema_text()
    if check:
        path = Path(output or (REFERENCE_PATH if markdown else SCHEMA_PATH))
        command = f"kmirror schema{' --markdown' if markdown else ''} -o {path}"
        try:
            current = read_capped(path, len(text.encode("utf-8")) + 1).decode("utf-8", errors="replace")
        except FileTooLarge:
            current = ""  # longer than the fresh text by more than a byte: stale, whatever it holds
        except OSError:
            raise KmirrorError(f"{path} does not exist (run '{command}' and commit the file)") from None
        if current != text:
            raise KmirrorError(f"{path} is stale: the models changed (run '{command}' and commit the file)")
        click.echo(f"{path} is up to date.")
        return
    if output is None or output == "-":
        click.echo(text, nl=False)
        return
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    click.echo(f"Wrote {path}.", err=True)
