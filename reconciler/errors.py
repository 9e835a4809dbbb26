"""The one error root of kmirror and its meaningful subclasses.

Every error a user can hit is a `KmirrorError` whose message says what was wrong, where, and what to do.
The CLI prints `Error: <message>` and exits 1; `--debug` shows the traceback instead.
"""

from __future__ import annotations


class KmirrorError(Exception):
    """Base of every error kmirror reports to a user."""


class ConfigError(KmirrorError):
    """The desired-state file (or another input file) is invalid."""


class ClusterUnreachableError(KmirrorError):
    """A Kafka cluster did not answer in time."""


class DevEnvError(KmirrorError):
    """The local development clusters could not be fetched, started or stopped."""


class WireFormatError(KmirrorError):
    """Bytes of an MM2 internal-topic record (heartbeat, checkpoint, offset-sync) could not be read or written."""
