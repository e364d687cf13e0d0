"""Who may do what, and how much: principals and Kafka's ACL model with its authorizer (authorizer.py), SCRAM
credentials (scram_store.py) and client quotas (quotas.py), each with the file store a single node keeps.
Below the cluster layer, which keeps the same state in ZooKeeper (cluster/zk_acls.py, zk_layout.py), and the
broker, which enforces it.
"""
