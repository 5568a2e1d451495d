"""``kcodec produce`` and record sizes: a 50 MB line is refused before anything of it is
read whole or sent (the CLI's --max-line-bytes, which also sets the producer's
max_request_size; the producer's own check is tests/client/producer/test_limits.py), and
the command stops there, saying where to resume."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import REPO


def _records_bytes(body) -> int:
    return sum(len(p.records or b"") for t in body.topic_data for p in t.partition_data)


def test_a_50_mb_line_is_refused_without_being_sent() -> None:
    from kcodec.broker import Cluster

    big = b"x" * (50 * 1024 * 1024)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with Cluster(1) as c:
        c.create_topic("big")
        c.record()
        p = subprocess.run([sys.executable, "-m", "kcodec", "produce", "-b", c.bootstrap,
                            "-t", "big"], input=b"first\n" + big + b"\nlast\n",
                           capture_output=True, env=env, timeout=300)
        sent = [_records_bytes(r.body) for r in c.recorded("Produce")]
        end = c.state.partition("big", 0).log.log_end_offset
    err = p.stderr.decode(errors="replace")
    assert p.returncode != 0, err
    # refused before sending: by the CLI's line limit (--max-line-bytes, 1 MiB by default),
    # which also sets the producer's max_request_size
    assert "line 2 is longer than 1048576 bytes" in err and "not sent" in err, err
    assert sent and max(sent) < 1024 * 1024, sent  # the big record never went out
    assert end == 1                                # the line before it was written
