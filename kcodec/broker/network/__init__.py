"""The broker's network layer, as Kafka's own broker is built::

    Acceptor ──sockets──> Processor × N ──Request──> RequestChannel ──> HandlerPool × M
                               ^                                              │
                               └────────────── response bytes ────────────────┘

* :mod:`.acceptor`: one thread that accepts connections and hands them round-robin to the
  processors;
* :mod:`.processor`: each processor is a thread with its own asyncio loop that owns its
  connections: it reads size-prefixed frames, parses the request header, and writes the
  answers back in request order (one request per connection is processed at a time);
* :mod:`.channel`: the queue between processors and handlers, with a global budget of
  request bytes, booked as they arrive;
* :mod:`.quotas`: connection limits per node and per client address;
* :mod:`.handlers`: the pool of threads that run the API handlers.
"""

from kcodec.broker.network.acceptor import Acceptor
from kcodec.broker.network.channel import CLOSE, NO_RESPONSE, Request, RequestChannel
from kcodec.broker.network.handlers import HandlerPool
from kcodec.broker.network.processor import Processor

__all__ = ["Acceptor", "Processor", "RequestChannel", "Request", "HandlerPool", "CLOSE",
           "NO_RESPONSE"]
