"""The broker's network layer, as Kafka's own broker is built::

    Acceptor ──sockets──> Processor × N ──Request──> RequestChannel ──> HandlerPool × M
                               ^                                              │
                               └────────────── response bytes ────────────────┘

    acceptor.py    one thread that accepts connections, handed round-robin to the processors
    processor.py   a thread with its own asyncio loop that owns its connections
    channel.py     the queue between processors and handlers
    handlers.py    the pool of threads that run the API handlers
    quotas.py      connection limits per node and per client address

A processor reads size-prefixed frames, parses the request header, and writes the answers
back in request order (one request per connection is processed at a time). The channel
keeps a global budget of request bytes, booked as they arrive.
"""

from kcodec.broker.network.acceptor import Acceptor
from kcodec.broker.network.channel import CLOSE, NO_RESPONSE, Request, RequestChannel
from kcodec.broker.network.handlers import HandlerPool
from kcodec.broker.network.processor import Processor

__all__ = ["Acceptor", "Processor", "RequestChannel", "Request", "HandlerPool", "CLOSE",
           "NO_RESPONSE"]
