"""The controller of a ZooKeeper-coordinated cluster: see controller.py."""

from odradek.cluster.controller.broker_changes import ShutdownRefused
from odradek.cluster.controller.controller import Controller

__all__ = ["Controller", "ShutdownRefused"]
