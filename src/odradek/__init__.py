"""odradek: a Kafka-compatible streaming broker written in Python."""

__version__ = "0.1.0"
