"""The control socket: a Unix-domain stream socket the master listens on, one JSON line
each way per connection.

    request   {"op": "status"}                           ops: QUESTIONS below
              {"op": "metadata", "what": "brokers"}
              {"op": "failed", "limit": 20}
    reply     {"ok": true, "result": ...}
              {"ok": false, "error": "what went wrong and what to do"}

Only the socket's owner may connect (the socket is made mode 0600). ``ask`` is the client
``kcodec ctl`` uses.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

__all__ = ["QUESTIONS", "ask", "listen", "ControlError", "NotRunning", "read_request", "reply",
           "write_description", "read_description", "DESCRIPTION"]

QUESTIONS = ("status", "lag", "offsets", "backlog", "members", "leader", "metadata",
             "failed", "requeue", "clear", "stop")
MAX_LINE = 1 << 20


# what the master writes into its state directory at start: its settings, secrets blanked,
# so ``kcodec ctl`` can find the store and the group when the runtime is stopped
DESCRIPTION = "runtime.json"


class ControlError(Exception):
    """The runtime could not be reached, or answered with an error."""


class NotRunning(ControlError):
    """No runtime answers on the control socket (none started, or it stopped)."""


def write_description(settings: Any) -> None:
    """``<state_dir>/runtime.json``: the settings as ``Settings.shown()`` prints them."""
    path = os.path.join(settings.state_dir, DESCRIPTION)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(settings.shown(), f, default=str)
    os.replace(tmp, path)


def read_description(state_dir: str) -> dict[str, Any]:
    """What ``write_description`` wrote in ``state_dir`` ({} when nothing was)."""
    try:
        with open(os.path.join(state_dir, DESCRIPTION)) as f:
            got = json.load(f)
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def listen(path: str) -> socket.socket:
    """A listening socket at ``path`` (a stale one from a dead runtime is replaced)."""
    if len(os.fsencode(path)) > 100:
        raise ValueError(f"control socket path too long for a Unix socket ({path!r}); give a "
                         "shorter --control-socket or --state-dir")
    if os.path.exists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)          # nobody answers: a dead runtime's leftover
        else:
            raise RuntimeError(f"another kcodec run answers on {path!r}; stop it, or give "
                               "this one its own --control-socket")
        finally:
            probe.close()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        srv.bind(path)
    finally:
        os.umask(old)
    srv.listen(16)
    srv.setblocking(False)
    return srv


def read_request(conn: socket.socket, timeout: float = 5.0) -> dict[str, Any]:
    conn.settimeout(timeout)
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_LINE:
            raise ValueError("request too long")
    req = json.loads(data.decode() or "null")
    if not isinstance(req, dict) or not isinstance(req.get("op"), str):
        raise ValueError('a request is one JSON object with an "op" (e.g. {"op": "status"})')
    return req


def reply(conn: socket.socket, obj: dict[str, Any]) -> None:
    conn.sendall(json.dumps(obj, separators=(",", ":"), default=str).encode() + b"\n")


def ask(path: str, op: str, timeout: float = 30.0, **args: Any) -> Any:
    """Send one question to the runtime at ``path``; its result, or ``ControlError``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(path)
        except FileNotFoundError:
            raise NotRunning(f"no runtime control socket at {path!r}: is `kcodec run` running "
                             "with this --state-dir (or --control-socket)?") from None
        except ConnectionRefusedError:
            raise NotRunning(f"nothing answers on {path!r}: the runtime that made it has "
                             "stopped") from None
        s.sendall(json.dumps({"op": op, **args}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        raise ControlError(f"the runtime at {path!r} did not answer {op!r} within "
                           f"{timeout:g} s") from None
    finally:
        s.close()
    if not data:
        raise ControlError(f"the runtime at {path!r} closed the connection without answering")
    msg = json.loads(data)
    if not msg.get("ok"):
        raise ControlError(msg.get("error") or "the runtime answered with an error")
    return msg.get("result")
