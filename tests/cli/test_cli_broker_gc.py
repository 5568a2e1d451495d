"""``kcodec broker`` sets the cyclic GC up once it serves (kcodec._gc.settle): what start-up
made is frozen and young collections run less often. Without it, full collections walked
the whole start-up heap and paused every connection for 30-45 ms at a time (the latency
benchmark's p99.9)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from kcodec._gc import YOUNG_THRESHOLD
from tests.support import REPO

PROBE = textwrap.dedent("""
    import gc, json, os, signal, sys, threading, time
    from kcodec.cli import main

    def probe():
        deadline = time.monotonic() + 30
        while gc.get_threshold()[0] == 700 and time.monotonic() < deadline:
            time.sleep(0.02)
        print(json.dumps({"frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}),
              file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=probe, daemon=True).start()
    sys.exit(main(["broker", "--port", "0", "--json"]))
""")


def test_the_broker_freezes_what_it_set_up_before_serving() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[0])["bootstrap"]
    state = json.loads(next(ln for ln in proc.stderr.splitlines() if ln.startswith("{")))
    assert state["young"] == YOUNG_THRESHOLD
    assert state["frozen"] > 10_000      # the imports and the broker's own objects
