"""`kmirror import mm2 FILE...`: turn MirrorMaker 2 configuration into a kmirror.yaml.

Reads a connect-mirror-maker properties file, MM2 connector JSON configs, or Strimzi `KafkaMirrorMaker2`
resources (told apart by content), writes the desired state (to `-o` or stdout), and lists on stderr, as
warnings, what could not be carried over. The output is validated before it is written, so what comes out is a
file `kmirror validate` accepts; when it would not be, the error names the input files and the field.

Must not: write a file kmirror would reject, or overwrite one without --force.
"""

from __future__ import annotations

from pathlib import Path

import click

from reconciler.errors import ConfigError
from reconciler.importers.mm2_config import MM2ImportError, import_files
from reconciler.spec.files import FileTooLarge, read_capped
from reconciler.spec.issues import SpecError, format_field_path
from reconciler.spec.loader import load_text
from reconciler.spec.yaml_source import MAX_DOCUMENT_BYTES


@click.group("import")
def import_group() -> None:
    """Import replication set up with another tool.

    \b
    Example:
      kmirror import mm2 connect-mirror-maker.properties -o kmirror.yaml && kmirror plan -f kmirror.yaml
    """


@import_group.command("mm2")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
def mm2(files: tuple[str, ...], output: str | None, force: bool) -> None:
    """Translate MM2 config: one connect-mirror-maker.properties, connector JSON files, or Strimzi resources.

    \b
    Examples:
      kmirror import mm2 connect-mirror-maker.properties -o kmirror.yaml
      kmirror import mm2 mm2-source.json mm2-checkpoint.json mm2-heartbeat.json
      kmirror import mm2 kafka-mirror-maker-2.yaml -o kmirror.yaml   # a Strimzi KafkaMirrorMaker2
    """
    texts = {}
    for name in files:
        try:
            texts[name] = read_capped(name, MAX_DOCUMENT_BYTES).decode("utf-8")
        except FileTooLarge:
            raise ConfigError(
                f"{name}: larger than {MAX_DOCUMENT_BYTES // 1024 // 1024} MiB, which no MM2 configuration is"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}: cannot read it ({exc})") from None
    try:
        result = import_files(texts)
    except MM2ImportError as exc:
        raise ConfigError(str(exc)) from None
    try:  # refuse to write a file kmirror itself would reject
        load_text(result.yaml_text, file=output or "kmirror.yaml")
    except SpecError as exc:
        problems = "; ".join(f"{format_field_path(i.path)}: {i.message}" for i in exc.errors)
        raise ConfigError(
            f"{', '.join(files)}: the translated configuration would not be a valid kmirror.yaml ({problems}). "
            "Nothing was written. Check that the input is a complete MM2 configuration (clusters with bootstrap "
            "servers and at least one enabled flow)."
        ) from None
    for note in result.notes:
        click.echo(f"warning: {note}", err=True)
    if output is None:
        click.echo(result.yaml_text, nl=False)
        return
    path = Path(output)
    if path.exists() and not force:
        raise ConfigError(f"{path} exists (use --force to overwrite it)")
    path.write_text(result.yaml_text, encoding="utf-8")
    flows = len(result.data["flows"])
    click.echo(
        f"Wrote {path}: {len(result.data['clusters'])} clusters, {flows} flow{'s' if flows != 1 else ''}.", err=True
    )
