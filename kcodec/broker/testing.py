"""Deprecated, and removed in kcodec 0.3: the fixtures moved to ``kcodec.testing.fixtures``.

    pytest_plugins = ["kcodec.testing.fixtures"]     # was ["kcodec.broker.testing"]
"""

import warnings

from kcodec.testing.fixtures import kafka_broker, kafka_cluster

warnings.warn("kcodec.broker.testing is deprecated and goes in kcodec 0.3; use "
              "pytest_plugins = [\"kcodec.testing.fixtures\"]", DeprecationWarning, stacklevel=2)

__all__ = ["kafka_broker", "kafka_cluster"]
