"""The broker's SCRAM credentials, changed at run time by AlterUserScramCredentials (API 51)
and read by DescribeUserScramCredentials (50) and by every SCRAM login.

It starts from the credentials the listeners were given (``--sasl-users``); what
AlterUserScramCredentials upserts or deletes is kept in ``scram_credentials.json`` of the
data dir (salt, iterations, StoredKey, ServerKey: never a password, as Kafka keeps them)
and wins over the start-up credentials at the next start, so a deleted user stays deleted.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from typing import Any

from kcodec.broker.security.sasl import CredentialLookup, ScramCredential

__all__ = ["ScramStore", "MECHANISMS"]

#: Kafka's ScramMechanism ids
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_IDS = {v: k for k, v in MECHANISMS.items()}


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class ScramStore:
    """mechanism -> user -> ScramCredential, with the changes kept on disk."""

    def __init__(self, data_dir: str | None) -> None:
        self.lock = threading.Lock()
        self.creds: dict[str, dict[str, ScramCredential]] = {m: {} for m in _IDS}
        self._changed: dict[str, dict[str, ScramCredential | None]] = {m: {} for m in _IDS}
        self._path = None if data_dir is None else os.path.join(data_dir,
                                                                "scram_credentials.json")
        if self._path and os.path.exists(self._path):
            with open(self._path, encoding="utf-8") as f:
                saved = json.load(f)
            for mech, users in saved.items():
                for user, c in users.items():
                    self._changed.setdefault(mech, {})[user] = None if c is None else \
                        ScramCredential(base64.b64decode(c["salt"]), int(c["iterations"]),
                                        base64.b64decode(c["stored_key"]),
                                        base64.b64decode(c["server_key"]))
        self._apply_changed()

    def _apply_changed(self) -> None:
        for mech, users in self._changed.items():
            for user, c in users.items():
                if c is None:
                    self.creds.setdefault(mech, {}).pop(user, None)
                else:
                    self.creds.setdefault(mech, {})[user] = c

    def seed(self, mechanism: str, credentials: dict[str, ScramCredential]) -> None:
        """The start-up credentials of ``mechanism``, below what was changed since."""
        with self.lock:
            for user, c in credentials.items():
                self.creds.setdefault(mechanism, {}).setdefault(user, c)
            self._apply_changed()

    def lookup(self, mechanism: str) -> CredentialLookup:
        def get(user: str) -> ScramCredential | None:
            with self.lock:
                return self.creds.get(mechanism, {}).get(user)
        return get

    def users(self) -> dict[str, list[tuple[int, int]]]:
        """user -> [(mechanism id, iterations)] of every credential."""
        out: dict[str, list[tuple[int, int]]] = {}
        with self.lock:
            for mech, users in self.creds.items():
                for user, c in users.items():
                    out.setdefault(user, []).append((_IDS[mech], c.iterations))
        return {u: sorted(v) for u, v in sorted(out.items())}

    def has(self, user: str, mechanism: str) -> bool:
        with self.lock:
            return user in self.creds.get(mechanism, {})

    def change(self, upserts: list[tuple[str, str, ScramCredential]],
               deletions: list[tuple[str, str]]) -> None:
        """Apply and keep (user, mechanism[, credential]) changes."""
        with self.lock:
            for user, mech in deletions:
                self._changed.setdefault(mech, {})[user] = None
            for user, mech, c in upserts:
                self._changed.setdefault(mech, {})[user] = c
            self._apply_changed()
            self._save()

    def _save(self) -> None:
        if self._path is None:
            return
        data: dict[str, Any] = {
            mech: {u: None if c is None else {
                "salt": _b64(c.salt), "iterations": c.iterations,
                "stored_key": _b64(c.stored_key), "server_key": _b64(c.server_key)}
                for u, c in users.items()}
            for mech, users in self._changed.items() if users}
        tmp = self._path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
