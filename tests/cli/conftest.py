"""Fixtures of the CLI tests: kcodec's broker as ``kcodec broker`` starts it, Tansu and
kcodec's broker side by side, a broker the test can kill."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.harness import CliBroker, DyingBroker


@pytest.fixture(scope="module")
def kbroker() -> Iterator[CliBroker]:
    b = CliBroker()
    yield b
    b.stop()


@pytest.fixture(params=[pytest.param("tansu", marks=pytest.mark.broker), "kcodec"])
def either(request):
    """Tansu (the ``broker`` fixture) and kcodec's broker started by its command. The Tansu
    case carries the ``broker`` marker itself: the fixture is asked for by name at run time,
    which conftest's marking by fixture names cannot see."""
    return request.getfixturevalue("broker" if request.param == "tansu" else "kbroker")


@pytest.fixture
def dying() -> Iterator[DyingBroker]:
    b = DyingBroker()
    yield b
    b.close()
