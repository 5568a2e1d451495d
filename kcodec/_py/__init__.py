"""The pure-Python twins of the hot modules: the typed reference.

``kcodec._impl`` chooses, once, these or the compiled twins of ``kcodec._cy``; the public
faces re-export the chosen one.

    varint.py       Kafka varints: unsigned, zigzag 32-bit and zigzag 64-bit
    crc.py          CRC-32C (record batches v2) and CRC-32 (IEEE, legacy messages)
    murmur.py       murmur2 as the Java client's ``Utils.murmur2`` computes it
    xerial.py       snappy-java's xerial framing and raw snappy blocks, bounded
    compression.py  every codec of record payloads, bounded
    batch.py        RecordBatch v2 (magic 2): reading any records blob
    legacy.py       MessageSet v0/v1: reading messages and building message sets
    builder.py      building one RecordBatch v2
    columns.py      columnar decode: every record of a blob, one column per field
    segscan.py      a log segment recovery's fast path: runs of whole, valid v2 batches
    share.py        share-group records (KIP-932), made from a decoded batch's records
    accum.py        the producer's record accumulator and its per-record step
    engine.py       the interpreter of protocol plans (``kcodec.protocol._plan``)
    peer.py         what ``kcodec.compat`` needs: error-remapping iterators, aiokafka's metadata
    msgcols.py      ``kcodec run``'s stored messages in columns (a store's chunk)
    _buf.py         buffer helpers shared by the twins (not a twin)
    _record.py      the record objects of ``batch`` and ``legacy``
    _wire.py        exact, bounds-checked reads for the record twins
"""
