"""librdkafka's mock cluster (inside the confluent-kafka wheel), driven through ctypes.

``MockCluster(brokers=3)`` starts one in this process and exposes ``bootstrap``; its
``rd_kafka_mock_*`` functions inject faults: per-API error sequences, coordinators,
ApiVersions ranges, topics. Test-only; needs confluent-kafka (the ``peers`` marker).
"""

from __future__ import annotations

import ctypes
import glob
import os

__all__ = ["MockCluster", "librdkafka"]

_LIB: ctypes.CDLL | None = None


def librdkafka() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        import confluent_kafka

        base = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
        paths = sorted(glob.glob(os.path.join(base, "confluent_kafka.libs", "librdkafka*.so*")))
        if not paths:
            raise RuntimeError("no librdkafka inside the confluent-kafka wheel")
        lib = ctypes.CDLL(paths[0])
        vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        lib.rd_kafka_conf_new.restype = vp
        lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
        lib.rd_kafka_new.restype = vp
        lib.rd_kafka_new.argtypes = [i, vp, cp, ctypes.c_size_t]
        lib.rd_kafka_destroy.argtypes = [vp]
        lib.rd_kafka_mock_cluster_new.restype = vp
        lib.rd_kafka_mock_cluster_new.argtypes = [vp, i]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
        lib.rd_kafka_mock_cluster_bootstraps.restype = cp
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
        lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, i, i]
        lib.rd_kafka_mock_push_request_errors_array.argtypes = [
            vp, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(i)]
        lib.rd_kafka_mock_clear_request_errors.argtypes = [vp, ctypes.c_int16]
        lib.rd_kafka_mock_coordinator_set.argtypes = [vp, cp, cp, ctypes.c_int32]
        lib.rd_kafka_mock_set_apiversion.argtypes = [vp, ctypes.c_int16, ctypes.c_int16,
                                                     ctypes.c_int16]
        lib.rd_kafka_mock_start_request_tracking.argtypes = [vp]
        lib.rd_kafka_mock_get_requests.restype = ctypes.POINTER(vp)
        lib.rd_kafka_mock_get_requests.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
        lib.rd_kafka_mock_request_api_key.restype = ctypes.c_int16
        lib.rd_kafka_mock_request_api_key.argtypes = [vp]
        lib.rd_kafka_mock_request_destroy_array.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t]
        _LIB = lib
    return _LIB


class MockCluster:
    def __init__(self, brokers: int = 3) -> None:
        lib = self.lib = librdkafka()
        conf = lib.rd_kafka_conf_new()
        err = ctypes.create_string_buffer(512)
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", err, 512)
        self.rk = lib.rd_kafka_new(0, conf, err, 512)
        if not self.rk:
            raise RuntimeError(f"rd_kafka_new: {err.value.decode()}")
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        if not self.mc:
            lib.rd_kafka_destroy(self.rk)
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def create_topic(self, name: str, partitions: int = 1, replication: int = 1) -> None:
        rc = self.lib.rd_kafka_mock_topic_create(self.mc, name.encode(), partitions, replication)
        if rc:
            raise RuntimeError(f"mock topic create failed: {rc}")

    def push_errors(self, api_key: int, *codes: int) -> None:
        """The next ``len(codes)`` requests of ``api_key`` (on any broker) fail with them."""
        arr = (ctypes.c_int * len(codes))(*codes)
        self.lib.rd_kafka_mock_push_request_errors_array(self.mc, api_key, len(codes), arr)

    def clear_errors(self, api_key: int) -> None:
        self.lib.rd_kafka_mock_clear_request_errors(self.mc, api_key)

    def set_coordinator(self, kind: str, key: str, broker: int) -> None:
        self.lib.rd_kafka_mock_coordinator_set(self.mc, kind.encode(), key.encode(), broker)

    def set_api_version(self, api_key: int, lo: int, hi: int) -> None:
        self.lib.rd_kafka_mock_set_apiversion(self.mc, api_key, lo, hi)

    def track_requests(self) -> None:
        self.lib.rd_kafka_mock_start_request_tracking(self.mc)

    def requests(self) -> list[int]:
        """API keys of the requests received since ``track_requests``, in order."""
        n = ctypes.c_size_t(0)
        arr = self.lib.rd_kafka_mock_get_requests(self.mc, ctypes.byref(n))
        keys = [self.lib.rd_kafka_mock_request_api_key(arr[i]) for i in range(n.value)]
        if n.value:
            self.lib.rd_kafka_mock_request_destroy_array(arr, n.value)
        return keys

    def close(self) -> None:
        if self.mc:
            self.lib.rd_kafka_mock_cluster_destroy(self.mc)
            self.mc = None
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
