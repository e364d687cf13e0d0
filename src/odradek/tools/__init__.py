"""Admin command-line tools (`odradek groups ...`); they talk to any Kafka-compatible broker."""
