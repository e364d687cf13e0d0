"""The topic registry: names, ids, partition counts and config overrides, persisted under the data directory.

File layout: `{data_dir}/__cluster_metadata/topics.json`, a JSON object
`{"cluster_id": str, "topics": [{"name", "id" (hex uuid), "partitions", "configs": {k: v}}]}`,
rewritten whole (tmp file, fsync, rename, fsync dir) on every change: topic changes are rare and the file
is small, and a rename is atomic, so a crash leaves either the old or the new registry, never half of one.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def topic_name_error(name: str | None) -> str | None:
    """Kafka's topic naming rules; returns why a name is illegal, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC.match(name):
        return f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def new_topic_id() -> bytes:
    # Kafka reserves the zero UUID and ids whose base64 starts with '-' (they read as command-line flags).
    while True:
        raw = uuid.uuid4().bytes
        if not base64.urlsafe_b64encode(raw).startswith(b"-"):
            return raw


@dataclass
class Topic:
    name: str
    topic_id: bytes
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicRegistry:
    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir / "__cluster_metadata"
        self._path = self._dir / "topics.json"
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[bytes, Topic] = {}
        self.cluster_id = ""
        self._load()

    def _load(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        if self._path.exists():
            state = json.loads(self._path.read_text())
            self.cluster_id = state["cluster_id"]
            for t in state["topics"]:
                self._index(Topic(t["name"], bytes.fromhex(t["id"]), t["partitions"], dict(t["configs"])))
        else:
            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            self._save()

    def _index(self, topic: Topic) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _save(self) -> None:
        state = {
            "cluster_id": self.cluster_id,
            "topics": [
                {"name": t.name, "id": t.topic_id.hex(), "partitions": t.partitions, "configs": t.configs}
                for t in self._by_name.values()
            ],
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: bytes) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    def create(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = Topic(name, new_topic_id(), partitions, dict(configs))
        self._index(topic)
        self._save()
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replace a topic's config overrides."""
        topic = self._by_name[name]
        topic.configs = dict(configs)
        self._save()
        return topic

    def set_partition_count(self, name: str, partitions: int) -> Topic:
        topic = self._by_name[name]
        if partitions < topic.partitions:
            raise ValueError("the partition count of a topic can only grow")
        topic.partitions = partitions
        self._save()
        return topic

    def delete(self, name: str) -> Topic | None:
        topic = self._by_name.pop(name, None)
        if topic is not None:
            del self._by_id[topic.topic_id]
            self._save()
        return topic
