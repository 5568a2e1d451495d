"""The ACLs on disk: ``acls.json`` in the broker's data dir, one list of rows::

    {"version": 1, "acls": [[resource_type, resource_name, pattern_type, principal, host,
                             operation, permission], ...]}        (enum values as numbers)

Written whole to a temporary file, flushed to disk, then renamed over the old one: a kill at
any moment leaves the old list or the new one, never a mix.
"""

from __future__ import annotations

import json
import os

from kcodec.protocol.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["AclStore", "ACL_FILE"]

ACL_FILE = "acls.json"


class AclStore:
    def __init__(self, data_dir: str | os.PathLike) -> None:
        self.path = os.path.join(os.fspath(data_dir), ACL_FILE)

    def load(self) -> list[AclBinding]:
        """The ACLs kept ([] if there is no file yet). A file that cannot be read is an
        error: starting without its ACLs would change who may do what."""
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the ACLs in {self.path}: {exc}; fix or remove the "
                             f"file (removing it drops every ACL)") from None
        try:
            rows = doc["acls"] if doc.get("version") == 1 else None
            if not isinstance(rows, list):
                raise TypeError("no version 1 list of ACLs")
            out = []
            for r in rows:
                rt, name, pt, principal, host, op, perm = r
                acl = AclBinding(ResourceType(rt), str(name), PatternType(pt), str(principal),
                                 str(host), AclOperation(op), AclPermissionType(perm))
                if acl.problem() is not None:
                    raise ValueError(f"{acl}: {acl.problem()}")
                out.append(acl)
            return out
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"the ACLs in {self.path} are malformed ({exc}); fix or remove "
                             f"the file (removing it drops every ACL)") from None

    def save(self, acls: list[AclBinding]) -> None:
        rows = [[int(a.resource_type), a.resource_name, int(a.pattern_type), a.principal, a.host,
                 int(a.operation), int(a.permission)] for a in acls]
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "acls": rows}, f, indent=0)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
