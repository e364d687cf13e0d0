"""The Kafka 0.7 wire protocol on a listener of its own (docs/kafka07.md).

codec.py      the 0.7 requests, responses and message sets as bytes (no I/O)
positions.py  0.7 byte offsets over the partition logs, and their index
service.py    what each request does to the broker's partitions
server.py     the KAFKA07 listeners and their connections
registry.py   the 0.7 ZooKeeper registry (with zookeeper.connect)
"""
