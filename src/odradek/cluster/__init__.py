"""Topics, partitions and replication: the metadata cache, replicas and their leadership, and (cluster
mode) the ZooKeeper registry, the controller and the replica fetchers. See DESIGN.md, "Cluster"."""


class ClusterError(Exception):
    """This broker cannot join its cluster (a configuration or identity problem)."""
