"""SCRAM credentials: per user, per mechanism, a salted and iterated `ScramCredential` (net/sasl.py) — never a
password. AlterUserScramCredentials (k51) changes them, DescribeUserScramCredentials (k50) lists them, and
the SCRAM mechanisms read them at every login.

Where they live:

- a single node: `scram-credentials.json` in the data directory, replaced atomically (tmp, fsync, rename)
  on every change, mode 0600:

      {"version": 1, "users": {"alice": {"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=8192"}}}

- cluster mode: ZooKeeper's `/config/users/<user>` as Kafka keeps them (`{"version": 1, "config":
  {"SCRAM-SHA-512": "salt=...,..."}}`), with a `/config/changes` notification so every broker reloads the
  user (cluster/member.py); `ScramStore.persist` is then the member's writer.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Awaitable, Callable

from odradek.net.sasl import ScramCredential
from odradek.storage.files import write_file_atomically

log = logging.getLogger(__name__)

FILE_NAME = "scram-credentials.json"
UserCredentials = dict[str, ScramCredential]  # mechanism -> credential
# What one AlterUserScramCredentials changes: user -> mechanism -> the new credential, or None to delete it.
Changes = dict[str, dict[str, "ScramCredential | None"]]


class ScramStore:
    def __init__(self, persist: Callable[[dict[str, UserCredentials]], Awaitable[None]] | None = None) -> None:
        self._users: dict[str, UserCredentials] = {}
        # writes the users whose credentials changed (their whole new set, empty: none left) before they apply
        self.persist = persist

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, UserCredentials]:
        return {user: dict(creds) for user, creds in self._users.items()}

    def set_user(self, user: str, credentials: UserCredentials) -> None:
        """Replace a user's credentials as loaded (an empty dict removes the user)."""
        if credentials:
            self._users[user] = dict(credentials)
        else:
            self._users.pop(user, None)

    async def alter(self, changes: Changes) -> None:
        """Apply ``changes`` once they are stored (OSError, or the backend's error, if they cannot be)."""
        updated: dict[str, UserCredentials] = {}
        for user, mechanisms in changes.items():
            creds = dict(self._users.get(user, {}))
            for mechanism, credential in mechanisms.items():
                if credential is None:
                    creds.pop(mechanism, None)
                else:
                    creds[mechanism] = credential
            updated[user] = creds
        if self.persist is not None:
            await self.persist(updated)
        for user, creds in updated.items():
            self.set_user(user, creds)


class ScramFile:
    """The single node's credential file (see the module docstring)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME

    def load_into(self, store: ScramStore) -> None:
        try:
            value = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        for user, creds in value.get("users", {}).items():
            store.set_user(user, {m: ScramCredential.from_text(text) for m, text in creds.items()})

    async def persist(self, store: ScramStore, updated: dict[str, UserCredentials]) -> None:
        users = store.users()
        users.update(updated)
        value = {"version": 1, "users": {user: {m: c.to_text() for m, c in sorted(creds.items())}
                                         for user, creds in sorted(users.items()) if creds}}
        write_file_atomically(self.path, json.dumps(value, indent=1).encode(), mode=0o600)
