from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runtime.support import Broker, RedisServer


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    r = RedisServer()
    yield r
    r.close()


@pytest.fixture(scope="module")
def kbroker() -> Iterator[Broker]:
    b = Broker()
    yield b
    b.close()
