"""Differential conformance tests: the same requests to Apache Kafka (the reference) and to odradek."""
