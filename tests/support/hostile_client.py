"""A consumer in a process of its own, for memory and liveness measurements.

    python -m tests.support.hostile_client BOOTSTRAP SECONDS [SETTINGS_JSON]

assigns ``t[0]`` from offset 0 and polls for SECONDS; prints one JSON line: the resident
memory when polling began (``base``) and its peak while polling (``peak``, bytes; the
peak is reset at the start where the kernel allows it), the errors ``poll`` raised and the
ones ``error_cb`` got, each with the seconds since polling began, and how many polls ran.
"""

from __future__ import annotations

import json
import sys
import time


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    from kcodec.client import Consumer, TopicPartition

    bootstrap, seconds = sys.argv[1], float(sys.argv[2])
    settings = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    called: list[tuple[float, str, str]] = []
    start = [time.monotonic()]
    if settings.pop("error_cb", False):
        settings["error_cb"] = lambda e: called.append(
            (round(time.monotonic() - start[0], 2), type(e).__name__, str(e)[:300]))
    c = Consumer(bootstrap_servers=bootstrap, **settings)
    c.assign([TopicPartition("t", 0)])
    c.seek(TopicPartition("t", 0), 0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")            # resets the peak resident size (Linux 4.0+)
    except OSError:
        pass
    base = _status("VmRSS")
    start[0] = time.monotonic()
    raised: list[tuple[float, str, str]] = []
    polls = 0
    while time.monotonic() - start[0] < seconds:
        polls += 1
        try:
            c.poll(0.2)
        except Exception as exc:   # what the application sees is what is measured
            raised.append((round(time.monotonic() - start[0], 2), type(exc).__name__,
                           str(exc)[:300]))
    peak = max(_status("VmHWM"), _status("VmRSS"))
    print(json.dumps({"base": base, "peak": peak, "raised": raised, "called": called,
                      "polls": polls}), flush=True)
    try:
        c.close(5)
    except Exception:
        pass


if __name__ == "__main__":
    main()
