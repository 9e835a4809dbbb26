"""`kmirror import mm2 FILE...`: turn MirrorMaker 2 configuration into a kmirror.yaml.

Reads a connect-mirror-maker properties file or MM2 connector JSON configs, writes the desired state (to
`-o` or stdout), and lists on stderr what could not be carried over. The output is validated before it is
written, so what comes out is a file `kmirror validate` accepts.
"""

from __future__ import annotations

from pathlib import Path

import click

from reconciler.errors import ConfigError
from reconciler.importers.mm2_config import MM2ImportError, import_files
from reconciler.spec.loader import load_text


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
    """Translate MM2 config: one connect-mirror-maker.properties, or connector JSON files.

    \b
    Examples:
      kmirror import mm2 connect-mirror-maker.properties -o kmirror.yaml
      kmirror import mm2 mm2-source.json mm2-checkpoint.json mm2-heartbeat.json
    """
    texts = {}
    for name in files:
        try:
            texts[name] = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}: cannot read it ({exc})") from None
    try:
        result = import_files(texts)
    except MM2ImportError as exc:
        raise ConfigError(str(exc)) from None
    target = output or "kmirror.yaml"
    load_text(result.yaml_text, file=target)  # refuse to write a file kmirror itself would reject
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
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
