"""Kafka wire protocol: schema tables, compiled codec, API keys and error codes.

See :mod:`odradek.protocol.codec` for the representation rules.
"""
from .api_keys import ApiKey
from .codec import (
    DecodeError,
    EncodeError,
    ProtocolError,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    decode_struct,
    encode_request,
    encode_response,
    encode_struct,
    has_api,
    request_header_version,
    request_versions,
    response_header_version,
)
from .errors import ERROR_INFO, ErrorCode

__all__ = [
    "ApiKey", "ErrorCode", "ERROR_INFO",
    "ProtocolError", "DecodeError", "EncodeError", "UnsupportedVersionError",
    "decode_request_header", "decode_request", "encode_response", "encode_request",
    "decode_response", "request_versions", "has_api", "encode_struct", "decode_struct",
    "request_header_version", "response_header_version",
]
