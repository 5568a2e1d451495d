"""``kcodec run``: a multi-process consumer runtime on kcodec's client.

A master process supervises pullers (group members that fetch) and sinkers (processes that
run the handler), with a store between them (``direct``: none, the puller runs the handler;
``file``: segment files on local disk; ``redis``: a Redis server), retries with backoff, a
failed queue and a dead-letter topic, and a control socket for ``kcodec ctl``.

    kcodec run myapp.jobs:handle -t orders -g billing --storage file --sinkers 2

or from Python, ``kcodec.runtime.run(handle, topics=["orders"], group="billing")``.

    app.py       the Python entry: ``run`` and ``App``
    config.py    ``Settings``: defaults, TOML, ``KCODEC_RUN_*``, flags; secrets redacted
    master.py    the supervisor: starts, restarts and stops the processes, answers ctl
    child.py     one process's life (logging, titles, its control thread)
    puller.py    a group member that fetches, and runs the handler in direct mode
    sinker.py    a process that claims batches from the store and runs the handler
    work.py      one batch through the handler and into its outcome
    handler.py   finding and calling the handler (batch or per record), its outcomes
    message.py   the ``Message`` handlers get, and its bytes in a store (one or many)
    _msgcols.py  the face of the msgcols twins: many messages in columns (message.py's)
    dlq.py       the dead-letter topic
    control.py   the control socket ``kcodec ctl`` talks to
    views.py     what ctl reads from the cluster and the store (lag, backlog, failed)
    members.py   the pullers' member ids, for removing a dead one from the group
    health.py    ``/health`` and ``/ready`` (``--health-port``)
    statedir.py  the state directory's locks
    storage/     the stores (a registry of plug-ins: file, redis)
"""

from kcodec.runtime.app import App, run
from kcodec.runtime.config import Settings
from kcodec.runtime.handler import Failed, per_record
from kcodec.runtime.message import Message

__all__ = ["App", "Failed", "Message", "Settings", "per_record", "run"]
