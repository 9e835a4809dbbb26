"""Pure parts of the exact group-offsets path: what a read gives kmirror, and when the path is not used."""

from __future__ import annotations

import pytest

from reconciler.kafka_clients import exact_offsets
from reconciler.kafka_clients.admin import _exact_committed
from reconciler.kafka_clients.exact_offsets import CommittedOffset

pytestmark = pytest.mark.unit


def test_a_read_keeps_committed_offsets_and_their_exact_utf8_metadata_and_leaves_the_rest_unknown() -> None:
    offsets, metadata = _exact_committed(
        {
            ("t", 0): CommittedOffset(5, "Grüße\x00".encode()),  # a NUL a librdkafka client committed: kept
            ("t", 1): CommittedOffset(6, None),  # none (empty or null)
            ("t", 2): CommittedOffset(-1001, b"x"),  # no committed offset: not an offset
            ("t", 3): CommittedOffset(7, b"\xff\xfe"),  # not UTF-8 (no Java client writes it): unknown
        }
    )
    assert offsets == {("t", 0): 5, ("t", 1): 6, ("t", 3): 7}
    assert metadata == {("t", 0): "Grüße\x00"}


def test_a_configuration_with_a_python_callback_does_not_take_the_c_path() -> None:
    assert exact_offsets.available({"bootstrap.servers": "b:9092"})  # the wheel's librdkafka is found
    assert not exact_offsets.available({"bootstrap.servers": "b:9092", "oauth_cb": lambda cfg: ("token", 0.0)})


def test_a_property_the_c_client_refuses_is_named_without_its_value() -> None:
    client = exact_offsets.ExactOffsets({"bootstrap.servers": "b:9092", "no.such.property": "s3cret"}, timeout=1)
    assert not client.usable()
    assert client.problem is not None and "no.such.property" in client.problem and "s3cret" not in client.problem
