"""The client's network floor: everything producer, consumer and admin share.

    core.py      Connection: the sans-I/O protocol state of one connection (framing,
                 correlation ids, in-flight requests, ApiVersions negotiation)
    requests.py  the requests the client sends, built as typed protocol objects
    wire.py      typed request objects onto the negotiated version, responses decoded
    conn.py      BrokerConnection: the core on an asyncio socket (TLS, SASL, timeouts)
    cluster.py   Cluster: connections by node id, metadata, routing, retries
    security.py  TLS contexts and the SASL exchange; sasl.py the client's mechanisms
    loop.py      LoopThread: the blocking facades' background event loop
    wakeup.py    Wakeup: the flag the sender and the fetcher wait on (one loop turn)
"""
