"""kcodec.broker: a single-process Kafka broker for development, tests, CI and demos.

The log (partition logs made of segments, recovery, retention) is in ``kcodec.broker.log``.
"""
