"""Resource addresses: printed once, parsed once, the same both ways; a malformed one is refused with its form."""

from __future__ import annotations

import pytest

from reconciler.resources.addresses import (
    AclAddress,
    AddressError,
    GroupOffsetsAddress,
    InternalTopicAddress,
    JobAddress,
    QuotaAddress,
    TopicAddress,
    job_flow,
    parse_address,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "typed"),
    [
        ("topic/cloud/orders.v1", TopicAddress("cloud", "orders.v1")),
        (
            "internal_topic/onprem/mm2-offset-syncs.cloud.internal",
            InternalTopicAddress("onprem", "mm2-offset-syncs.cloud.internal"),
        ),
        ("acl/cloud/User:alice/READ/orders", AclAddress("cloud", "User:alice", "READ", "orders")),
        ("acl/cloud/User:CN=a/OU=b/WRITE/orders", AclAddress("cloud", "User:CN=a/OU=b", "WRITE", "orders")),
        ("job/onprem-to-cloud", JobAddress("onprem-to-cloud")),
        ("group_offsets/cloud/team/app-1", GroupOffsetsAddress("cloud", "team/app-1")),
        ("quota/onprem/kmirror-f-source", QuotaAddress("onprem", "kmirror-f-source")),
    ],
)
def test_an_address_parses_to_its_type_and_prints_back_the_same(text: str, typed: object) -> None:
    assert parse_address(text) == typed
    assert str(typed) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders", "must start with one of topic, internal_topic, acl, job, group_offsets, quota"),
        ("topic/cloud", "the form is topic/<cluster>/<topic>"),
        ("topic/cloud/a/b", "the form is topic/<cluster>/<topic>"),
        ("topic//orders", "the form is topic/<cluster>/<topic>"),
        ("acl/cloud/READ/", "the form is acl/<cluster>/<principal>/<operation>/<topic>"),
        ("job/a/b", "the form is job/<flow>"),
        ("job/", "the form is job/<flow>"),
        ("quota/onprem", "the form is quota/<cluster>/<client-id>"),
    ],
)
def test_a_malformed_address_is_refused_naming_the_form(text: str, expected: str) -> None:
    with pytest.raises(AddressError, match=expected):
        parse_address(text)


def test_job_flow_reads_a_job_address_and_refuses_any_other() -> None:
    assert job_flow("job/f.1") == "f.1"
    with pytest.raises(AddressError, match="not a job address"):
        job_flow("topic/cloud/orders")
