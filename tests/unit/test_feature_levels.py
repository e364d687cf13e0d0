"""The features ApiVersions claims (k18_api_versions.py): metadata.version follows the request versions served."""

from odradek.broker.handlers import load_handlers
from odradek.broker.handlers.k18_api_versions import (finalized_features, metadata_version_level,
                                                      metadata_version_name, supported_features)
from odradek.protocol.api_keys import ApiKey

FETCH, LIST_OFFSETS, DESCRIBE_LOG_DIRS = ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.DESCRIBE_LOG_DIRS


def test_metadata_version_is_the_highest_level_whose_requests_are_served():
    assert metadata_version_level({FETCH: 16, LIST_OFFSETS: 9}) == 21  # short of 4.0-IV0's Fetch 17
    assert metadata_version_level({FETCH: 17, LIST_OFFSETS: 9, DESCRIBE_LOG_DIRS: 4}) == 24
    assert metadata_version_name(24) == "4.0-IV2"
    assert metadata_version_level({FETCH: 17, LIST_OFFSETS: 11, DESCRIBE_LOG_DIRS: 5}) == 26  # 4.1-IV1: Fetch 18
    assert metadata_version_level({FETCH: 18, LIST_OFFSETS: 10, DESCRIBE_LOG_DIRS: 5}) == 28  # 4.2-IV1: LO 11
    assert metadata_version_level({FETCH: 18, LIST_OFFSETS: 11, DESCRIBE_LOG_DIRS: 4}) == 29  # 4.3-IV0: DLD 5
    # 4.4-IV1 needs CIDR ACL hosts: never claimed, whatever is served
    assert metadata_version_name(metadata_version_level({FETCH: 99, LIST_OFFSETS: 99, DESCRIBE_LOG_DIRS: 99})) \
        == "4.4-IV0"


def test_features_are_finalized_at_their_supported_maximum():
    load_handlers()
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in supported_features()}
    assert set(supported) == {"group.version", "metadata.version", "share.version", "streams.version",
                              "transaction.version"}
    assert supported["share.version"] == (0, 1) and supported["metadata.version"][0] == 7
    assert all(f["min_version_level"] == f["max_version_level"] == supported[f["name"]][1]
               for f in finalized_features())
