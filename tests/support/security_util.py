"""Test-only security peers in front of the real broker (Tansu).

* ``TansuAdvertising(port)``: Tansu on its own port, advertising ``localhost:port`` (the
  address of whatever terminator sits in front of it), so clients reconnect through it.
* ``Stunnel``: Debian's stunnel4 terminating TLS in front of a plaintext port, with a
  certificate made by ``trustme``: an independent TLS server.
* ``SaslFront``: a small front layer that answers SaslHandshake/SaslAuthenticate itself
  with kcodec's broker-side building blocks (``kcodec.broker.security``), optionally over
  TLS, and forwards every other request to Tansu once the client is authenticated. It is
  only a development stand-in for kcodec's own broker listeners.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kcodec.broker.security import SaslAuthenticator
from kcodec.protocol import RESPONSES, decode_request, encode_response
from kcodec.testing.tansu import Tansu, free_port


def stunnel_binary() -> str | None:
    return shutil.which("stunnel4") or shutil.which("stunnel")


#: why the TLS tests skip without stunnel, and how to have them run
NO_STUNNEL = ("stunnel is not installed (the TLS tests' independent TLS terminator): run "
              "KCODEC_INSTALL_SYSTEM_PACKAGES=1 scripts/test to install it with apt-get "
              "(Debian, Ubuntu; as root or with sudo), or install stunnel4 (Debian, Ubuntu) / "
              "stunnel (Homebrew, Fedora) yourself")


class TansuAdvertising(Tansu):
    """Tansu listening on a free port but advertising ``localhost:advertised``."""

    def __init__(self, advertised: int) -> None:
        super().__init__()
        self.advertised = advertised

    def _start_once(self, timeout: float) -> bool:   # same as Tansu, other advertised URL
        import os
        import signal  # noqa: F401

        # two free_port() calls can return the same port; Tansu on the terminator's port
        # would answer its readiness probe and then read a TLS hello as a Kafka frame
        while self.port == self.advertised:
            self.port = free_port()
            self.bootstrap = f"127.0.0.1:{self.port}"
        url = f"tcp://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TANSU")}
        env.setdefault("RUST_LOG", "warn")
        from kcodec.testing.net import accepts
        from kcodec.testing.tansu import tansu_binary

        self.proc = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url,
             "--advertised-listener-url", f"tcp://localhost:{self.advertised}",
             "--storage-engine", "memory://tansu/"],
            cwd=self._dir.name, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip()
                self.output.append(line)
                if "ready in" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if ready.is_set() and accepts(self.port):
                return True
            time.sleep(0.02)
        self.stop()
        return False


class Certs:
    """A test CA and a server certificate for localhost/127.0.0.1, as PEM files."""

    def __init__(self, names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> None:
        import trustme

        self.dir = tempfile.TemporaryDirectory(prefix="kcodec-certs-")
        d = Path(self.dir.name)
        self.ca = trustme.CA()
        cert = self.ca.issue_cert(*names)
        self.cafile = str(d / "ca.pem")
        self.ca.cert_pem.write_to_path(self.cafile)
        self.certfile = str(d / "server.pem")
        self.keyfile = str(d / "server.key")
        cert.cert_chain_pems[0].write_to_path(self.certfile)
        for extra in cert.cert_chain_pems[1:]:
            extra.write_to_path(self.certfile, append=True)
        cert.private_key_pem.write_to_path(self.keyfile)
        self.bundle = str(d / "bundle.pem")       # stunnel wants key and chain in one file
        cert.private_key_and_cert_chain_pem.write_to_path(self.bundle)

    def cleanup(self) -> None:
        self.dir.cleanup()


class Stunnel:
    """stunnel terminating TLS on ``port`` and forwarding to ``127.0.0.1:target``."""

    def __init__(self, port: int, target: int, certs: Certs) -> None:
        self.port, self.target, self.certs = port, target, certs
        self.proc: subprocess.Popen[bytes] | None = None
        self.conf = Path(certs.dir.name) / f"stunnel-{port}.conf"

    def start(self) -> Stunnel:
        binary = stunnel_binary()
        if binary is None:
            raise RuntimeError("stunnel is not installed (apt-get install stunnel4)")
        if self.port == self.target:
            raise ValueError(f"stunnel's port {self.port} is its target's")
        self.conf.write_text(
            "foreground = yes\npid =\ndebug = 3\n"
            f"[kafka]\naccept = 127.0.0.1:{self.port}\nconnect = 127.0.0.1:{self.target}\n"
            f"cert = {self.certs.bundle}\n")
        log = self.conf.with_suffix(".log")
        with log.open("wb") as out:
            self.proc = subprocess.Popen([binary, str(self.conf)], stdout=out,
                                         stderr=subprocess.STDOUT)
        # ready = this stunnel completes a TLS handshake with its certificate on the port:
        # a bare TCP connect would also succeed on whatever else took the port meanwhile
        ctx = ssl.create_default_context(cafile=self.certs.cafile)
        ctx.check_hostname = False
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                raise RuntimeError(f"stunnel exited at start: {log.read_text(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as raw, \
                        ctx.wrap_socket(raw):
                    return self
            except (OSError, ssl.SSLError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"stunnel did not complete a TLS handshake on 127.0.0.1:{self.port} "
                           f"within 10 s: {log.read_text(errors='replace')}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(4)
    (size,) = struct.unpack(">i", head)
    if not 0 <= size <= 64 << 20:
        raise ConnectionError("bad frame size")
    return await reader.readexactly(size)


class SaslFront:
    """SASL (and optionally TLS) in front of a plaintext broker, in its own thread.

    ``mechanisms``: as for ``SaslAuthenticator``. ``events`` records what happened
    (("auth", principal), ("reauth", principal), ("fail", message), ("refused", api_key)).
    """

    def __init__(self, port: int, target: int,
                 mechanisms: dict[str, Callable[[], Any]],
                 ssl_context: ssl.SSLContext | None = None,
                 connections_max_reauth_ms: int = 0) -> None:
        self.port, self.target = port, target
        self.mechanisms = mechanisms
        self.ssl_context = ssl_context
        self.max_reauth_ms = connections_max_reauth_ms
        self.events: list[tuple[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> SaslFront:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self.loop)
        fut.result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port,
                                                  ssl=self.ssl_context)

    def stop(self) -> None:
        async def down() -> None:
            if self._server is not None:
                self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(down(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        auth = SaslAuthenticator(self.mechanisms, self.max_reauth_ms)
        up_r: asyncio.StreamReader | None = None
        up_w: asyncio.StreamWriter | None = None
        try:
            while True:
                frame = await _read_frame(reader)
                api_key, version = struct.unpack_from(">hh", frame, 0)
                if api_key in (17, 36):
                    hdr, req = decode_request(frame)
                    was = auth.principal
                    if api_key == 17:
                        resp = auth.handshake(req)
                    else:
                        resp = auth.authenticate(req, version)
                        if resp["error_code"]:
                            self.events.append(("fail", resp["error_message"]))
                        elif auth.state == auth.AUTHENTICATED and resp is not None:
                            self.events.append(("reauth" if was else "auth", auth.principal))
                    body = RESPONSES[api_key](**{k: v for k, v in resp.items()
                                                 if k in RESPONSES[api_key]._names})
                    writer.write(encode_response(body, version, hdr.correlation_id))
                    await writer.drain()
                    if auth.close_after:
                        return
                    continue
                if not auth.allowed(api_key):
                    self.events.append(("refused", api_key))
                    return        # as Kafka: an unauthenticated request closes the connection
                if up_w is None:
                    up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target)
                up_w.write(struct.pack(">i", len(frame)) + frame)
                await up_w.drain()
                if api_key == 0 and _acks_zero(frame):
                    continue
                assert up_r is not None
                answer = await _read_frame(up_r)
                if api_key == 18:
                    answer = _with_sasl_apis(frame, answer)
                writer.write(struct.pack(">i", len(answer)) + answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, OSError):
            return
        finally:
            writer.close()
            if up_w is not None:
                up_w.close()


def _acks_zero(frame: bytes) -> bool:
    try:
        _, req = decode_request(frame)
        return req.acks == 0
    except Exception:
        return False


def _with_sasl_apis(request: bytes, answer: bytes) -> bytes:
    """The broker's ApiVersions answer with SaslHandshake v0-1 and SaslAuthenticate v0-2."""
    from kcodec.protocol import decode_response

    hdr, req = decode_request(request)
    version = struct.unpack_from(">h", request, 2)[0]
    cid, body = decode_response(answer, 18, version)
    if body.error_code:
        return answer
    Key = type(body).ApiVersion if hasattr(type(body), "ApiVersion") else None
    keys = [k for k in body.api_keys if k.api_key not in (17, 36)]
    make = Key or type(body.api_keys[0])
    keys += [make(api_key=17, min_version=0, max_version=1),
             make(api_key=36, min_version=0, max_version=2)]
    body.api_keys = keys
    return encode_response(body, 0 if version == 0 else version, cid, framed=False)


__all__ = ["TansuAdvertising", "Certs", "Stunnel", "SaslFront", "stunnel_binary", "free_port"]
