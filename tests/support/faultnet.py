"""Two network namespaces joined by a userspace link that misbehaves on request.

    clients ns (198.51.100.1) ==veth== [root ns: the link process] ==veth== broker ns (.2)

This kernel has no netem, so the link is a process of ours: it reads every Ethernet frame
from the root side of one veth pair (a packet socket) and writes it to the other after
applying the current faults. Frames are IP packets of real TCP connections, so the
kernel's TCP on both sides meets loss, duplicates, reordering and delay as on a bad
network, and retransmits. The faults (``FaultNet.set``, JSON lines on the link's stdin):

    delay_ms, jitter_ms   each packet waits delay +- jitter (order kept, as netem does)
    loss                  probability a packet is dropped
    dup                   probability a packet is sent twice
    reorder               probability a packet skips the queue (sent at once)
    block                 "none", "both", "c2b" (clients to broker) or "b2c": a partition,
                          also one-way
    reset_s               for this many seconds every TCP segment is answered with RSTs
                          to both ends (forged from its own sequence numbers) and dropped

``{"report": PATH}`` makes the link write what it did so far to PATH (JSON: packets
forwarded, dropped by loss, blocked, duplicated, reordered, and RSTs forged), so a test
can show its faults happened. The link's random choices follow ``seed`` (printed by the
tests, ``KCODEC_FAULT_SEED`` to repeat them).

ARP passes unharmed unless blocked. Addresses are TEST-NET-2 (RFC 5737) inside namespaces
this harness makes and removes (a machine that uses that range itself is refused); the
root-side veths have no address and no ARP, and nothing leaves them.

``FaultNet.available()`` says why the harness cannot run here (not root, no ``ip``, no
network namespaces); tests skip with that reason.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

NET = "198.51.100."
CLIENT_IP, BROKER_IP = NET + "1", NET + "2"
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET, PACKET_VNET_HDR = 263, 15
# The virtio-net header a packet socket with PACKET_VNET_HDR puts before each frame: the
# kernel leaves TCP checksums to "hardware" on veths, and this header carries where the
# checksum goes, so a frame passes through the link as it came (our forged RSTs carry
# their own checksum and a zero header).
VNET = 10
NO_VNET = bytes(VNET)


def _ip(*argv: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=30)


def sweep() -> list[str]:
    """Delete the namespaces (and with them their veths) of runs whose process is gone: a
    test run killed with SIGKILL never reaches ``__exit__``. Returns the names deleted."""
    out = _ip("ip", "netns", "list", check=False).stdout.split("\n")
    gone = []
    for line in out:
        m = re.match(r"(kcf-[cbp]-(\d+)-[0-9a-f]+)", line)
        if m is None:
            continue
        try:
            os.kill(int(m.group(2)), 0)
            continue                      # its owner still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        ns = m.group(1)
        for pid in _ip("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        _ip("ip", "netns", "del", ns, check=False)
        gone.append(ns)
    return gone


class FaultNet:
    """The namespaces, veths and link process of one test (a context manager)."""

    def __init__(self, seed: int | None = None) -> None:
        env_seed = int(os.environ.get("KCODEC_FAULT_SEED", "0"))
        self.seed = seed or env_seed or random.randrange(1, 2**31)
        tag = uuid.uuid4().hex[:6]
        # the owner's pid in the name: a later run deletes what a killed one left behind
        self.client_ns = f"kcf-c-{os.getpid()}-{tag}"
        self.broker_ns = f"kcf-b-{os.getpid()}-{tag}"
        self.c_root, self.c_ns = f"kfc{tag}r", f"kfc{tag}n"
        self.b_root, self.b_ns = f"kfb{tag}r", f"kfb{tag}n"
        self.link: subprocess.Popen | None = None
        self.procs: list[subprocess.Popen] = []

    @staticmethod
    def available() -> str | None:
        """None, or why network namespaces cannot be made here."""
        if sys.platform != "linux":
            return "network namespaces are Linux only"
        if os.geteuid() != 0:
            return "making network namespaces needs root (run the fault tests as root)"
        if shutil.which("ip") is None:
            return "the 'ip' command (iproute2) is not installed"
        mine = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
        if f" {NET}" in mine:
            return f"this machine uses {NET}0/24 itself; the fault harness needs it free"
        name = f"kcf-p-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
        if r.returncode != 0:
            return f"'ip netns add' failed here: {r.stderr.strip()}"
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        return None

    def __enter__(self) -> FaultNet:
        sweep()
        try:
            for ns, root, inner, addr in ((self.client_ns, self.c_root, self.c_ns, CLIENT_IP),
                                          (self.broker_ns, self.b_root, self.b_ns, BROKER_IP)):
                _ip("ip", "netns", "add", ns)
                _ip("ip", "link", "add", root, "type", "veth", "peer", "name", inner,
                    "netns", ns)
                # no segmentation offload: every frame the link sees fits the MTU
                _ip("ip", "link", "set", inner, "gso_max_segs", "1", "gso_max_size", "1500",
                    ns=ns)
                _ip("sysctl", "-qw", f"net.ipv6.conf.{inner}.disable_ipv6=1", ns=ns, check=False)
                _ip("ip", "addr", "add", f"{addr}/24", "dev", inner, ns=ns)
                _ip("ip", "link", "set", inner, "up", ns=ns)
                _ip("ip", "link", "set", "lo", "up", ns=ns)
                _ip("sysctl", "-qw", f"net.ipv6.conf.{root}.disable_ipv6=1", check=False)
                _ip("ip", "link", "set", root, "arp", "off", "promisc", "on", "up")
            self.link = subprocess.Popen(
                [sys.executable, "-m", "tests.support.faultnet", self.c_root, self.b_root,
                 str(self.seed)], stdin=subprocess.PIPE, text=True, cwd=_repo())
            time.sleep(0.2)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        if self.link is not None and self.link.poll() is None:
            self.link.kill()
            self.link.wait(10)
        for ns in (self.client_ns, self.broker_ns):
            pids = _ip("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
        for root in (self.c_root, self.b_root):
            _ip("ip", "link", "del", root, check=False)
        for ns in (self.client_ns, self.broker_ns):
            _ip("ip", "netns", "del", ns, check=False)

    def set(self, **faults: Any) -> None:
        """Change the link's faults (the keys of the module docstring)."""
        assert self.link is not None and self.link.stdin is not None
        self.link.stdin.write(json.dumps(faults) + "\n")
        self.link.stdin.flush()

    def counters(self, timeout: float = 5.0) -> dict[str, int]:
        """What the link did so far: forwarded, lost, blocked, duplicated, reordered, resets."""
        path = f"/tmp/kcodec-faultnet-{os.getpid()}-{uuid.uuid4().hex[:6]}.json"
        self.set(report=path)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                try:
                    with open(path) as f:
                        return json.load(f)
                except (FileNotFoundError, json.JSONDecodeError):
                    time.sleep(0.05)
            raise TimeoutError("the fault link did not report its counters")
        finally:
            if os.path.exists(path):
                os.unlink(path)

    def spawn(self, ns: str, argv: list[str], **kw: Any) -> subprocess.Popen:
        """A process in namespace ``ns``, killed when the harness ends."""
        kw.setdefault("cwd", _repo())
        p = subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kw)
        self.procs.append(p)
        return p


def _repo() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- the link process

def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _rst(eth_src: bytes, eth_dst: bytes, ip_src: bytes, ip_dst: bytes, sport: int,
         dport: int, seq: int) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x04, 0, 0, 0)
    pseudo = ip_src + ip_dst + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", _csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, ip_src, ip_dst)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return eth_dst + eth_src + b"\x08\x00" + ip + tcp


def _tcp(frame: bytes) -> tuple[int, int, int, int, int, int] | None:
    """(ip header offset, tcp offset, sport, dport, seq, ack) of a TCP/IPv4 frame with no
    SYN or RST, else None."""
    if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return None
    ihl = (frame[14] & 0x0F) * 4
    t = 14 + ihl
    sport, dport, seq, ack, _off, flags = struct.unpack_from("!HHIIBB", frame, t)
    if flags & 0x06:          # SYN or RST
        return None
    return 14, t, sport, dport, seq, ack


class _Link:
    def __init__(self, a: str, b: str, seed: int) -> None:
        self.socks = {}
        for name in (a, b):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            s.bind((name, 0))
            s.setblocking(False)
            self.socks[name] = s
        self.a, self.b = a, b
        self.f: dict[str, Any] = {"delay_ms": 0, "jitter_ms": 0, "loss": 0.0, "dup": 0.0,
                                  "reorder": 0.0, "block": "none"}
        self.reset_until = 0.0
        self.queue: list[tuple[float, int, str, bytes]] = []
        self.last: dict[str, float] = {a: 0.0, b: 0.0}
        self.n = 0
        self.rng = random.Random(seed)
        self.count = dict.fromkeys(("forwarded", "lost", "blocked", "duplicated", "reordered",
                                    "resets"), 0)

    def control(self, line: str) -> None:
        msg = json.loads(line)
        if "report" in msg:
            path = msg.pop("report")
            with open(path + ".part", "w") as f:
                json.dump(self.count, f)
            os.replace(path + ".part", path)
        if "reset_s" in msg:
            self.reset_until = time.monotonic() + float(msg.pop("reset_s"))
        self.f.update(msg)

    def _blocked(self, out: str) -> bool:
        block = self.f["block"]
        to_broker = out == self.b
        return block == "both" or (block == "c2b" and to_broker) or (block == "b2c" and not to_broker)

    def forward(self, packet: bytes, src: str) -> None:
        """``packet``: the virtio-net header, then the Ethernet frame."""
        out = self.b if src == self.a else self.a
        if self._blocked(out):
            self.count["blocked"] += 1
            return
        now = time.monotonic()
        frame = packet[VNET:]
        ipv4 = frame[12:14] == b"\x08\x00"
        if ipv4 and now < self.reset_until:
            t = _tcp(frame)
            if t is not None:
                ih, _, sport, dport, seq, ack = t
                ip_src, ip_dst = frame[ih + 12:ih + 16], frame[ih + 16:ih + 20]
                self.socks[out].send(NO_VNET + _rst(frame[6:12], frame[0:6], ip_src, ip_dst,
                                                    sport, dport, seq))
                self.socks[src].send(NO_VNET + _rst(frame[0:6], frame[6:12], ip_dst, ip_src,
                                                    dport, sport, ack))
                self.count["resets"] += 1
                return
        f = self.f
        if ipv4 and self.rng.random() < f["loss"]:
            self.count["lost"] += 1
            return
        copies = 2 if ipv4 and self.rng.random() < f["dup"] else 1
        self.count["duplicated"] += copies - 1
        self.count["forwarded"] += 1
        for _ in range(copies):
            if ipv4 and self.rng.random() < f["reorder"]:
                self.count["reordered"] += 1
                at = now                       # jumps the queue
            else:
                wait = (f["delay_ms"] + self.rng.uniform(-f["jitter_ms"], f["jitter_ms"])) / 1000
                at = max(now + max(wait, 0.0), self.last[out])
                self.last[out] = at
            self.n += 1
            heapq.heappush(self.queue, (at, self.n, out, packet))

    def run(self) -> None:
        stdin = sys.stdin.fileno()
        pending = b""       # control bytes read but not yet a whole line (os.read: no
        #                     buffer of sys.stdin's holding lines that select cannot see)
        names = {s.fileno(): name for name, s in self.socks.items()}
        while True:
            now = time.monotonic()
            while self.queue and self.queue[0][0] <= now:
                _, _, out, frame = heapq.heappop(self.queue)
                try:
                    self.socks[out].send(frame)
                except OSError:
                    pass
            timeout = max(self.queue[0][0] - now, 0) if self.queue else 1.0
            ready, _, _ = select.select([stdin, *names], [], [], timeout)
            for fd in ready:
                if fd == stdin:
                    chunk = os.read(stdin, 65536)
                    if not chunk:
                        return
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            self.control(line.decode())
                    continue
                sock = self.socks[names[fd]]
                while True:
                    try:
                        frame, addr = sock.recvfrom(65535)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING:    # what we sent ourselves
                        continue
                    self.forward(frame, names[fd])


if __name__ == "__main__":
    _Link(sys.argv[1], sys.argv[2], int(sys.argv[3])).run()
