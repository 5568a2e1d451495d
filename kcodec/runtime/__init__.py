"""``kcodec run``: a multi-process consumer runtime on kcodec's client.

A master process supervises pullers (group members that fetch) and sinkers (processes that
run the handler), with a store between them (``direct``: none, the puller runs the handler;
``file``: segment files on local disk; ``redis``: a Redis server), retries with backoff, a
failed queue and a dead-letter topic, and a control socket for ``kcodec ctl``.

    kcodec run myapp.jobs:handle -t orders -g billing --storage file --sinkers 2

or from Python, ``kcodec.runtime.run(handle, topics=["orders"], group="billing")``.
"""

from kcodec.runtime.app import App, run
from kcodec.runtime.config import Settings
from kcodec.runtime.handler import Failed, per_record
from kcodec.runtime.message import Message

__all__ = ["App", "Failed", "Message", "Settings", "per_record", "run"]
