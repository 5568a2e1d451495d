# Compiled compression twin: what the compiled record readers and builders cimport.

# decompress() for a codec id the caller read from a batch: a plain Kafka-style lz4 frame
# straight from C (kcodec._cy._lz4), anything else through the registry.
cdef object decompress_codec(int codec, object data, Py_ssize_t max_size, int magic)
