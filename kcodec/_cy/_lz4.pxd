# A plain Kafka-style lz4 frame decoded from C (see _lz4.pyx); None: take the general path.

cdef object lz4_frame(object data, Py_ssize_t max_size, int magic)
