"""One small module per compression codec, behind ``kcodec.compression``.

Each module defines NAME, PACKAGE (what to ``pip install``), LEVELS (a ``range`` or None),
DEFAULT_LEVEL, ``compress(view, level, magic)``, ``decompress(view, max_size, magic)`` and
``library() -> (library, version)`` (raising UnsupportedCodecError when it is missing).
They receive flat unsigned-byte memoryviews and an already validated level and limit.

    registry.py     codec ids and names, levels, and the dispatch by codec
    gzip_codec.py   gzip (codec 1): RFC 1952 members, as Java's GZIPOutputStream writes them
    lz4_codec.py    lz4 (codec 3): LZ4 frames, and Kafka's legacy frames for magic 0
    zstd_codec.py   zstd (codec 4): Zstandard frames (RFC 8878), with or without a size
    xxhash32.py     XXH32 for LZ4 frame header checksums (a few bytes a frame: pure Python)
    _util.py        byte views and a bounded streaming drain, for the codec modules
"""
