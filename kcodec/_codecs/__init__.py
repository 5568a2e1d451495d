"""One small module per compression codec, behind ``kcodec.compression``.

Each module defines NAME, PACKAGE (what to ``pip install``), LEVELS (a ``range`` or None),
DEFAULT_LEVEL, ``compress(view, level, magic)``, ``decompress(view, max_size, magic)`` and
``library() -> (library, version)`` (raising UnsupportedCodecError when it is missing).
They receive flat unsigned-byte memoryviews and an already validated level and limit.
"""
