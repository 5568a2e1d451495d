"""Shared fixtures: both twins in one process, and the real broker.

* ``impl`` is parametrized over every implementation this run covers: "cython" and
  "python" normally, "python" only when KCODEC_NO_EXTENSIONS=1. A run that expects the
  extension but cannot load it stops with an error instead of quietly testing less.
* ``twin(name)`` returns module ``name`` of the current ``impl``.
* ``pair(name)`` returns ``(cython_module, python_module)`` for differential tests.
* ``broker`` is one Tansu broker for the whole session (tests use fresh topic names).
"""

from __future__ import annotations

import os
import uuid

import pytest

from kcodec import _impl

NO_EXT = _impl._truthy("KCODEC_NO_EXTENSIONS")
IMPLS = ["python"] if NO_EXT else _impl.twins()


def pytest_configure(config: pytest.Config) -> None:
    if not NO_EXT and "cython" not in IMPLS:
        raise pytest.UsageError(
            "the compiled extension is not built or does not load "
            f"({_impl.EXTENSION_ERROR}); run scripts/test, or set KCODEC_NO_EXTENSIONS=1 "
            "to test the pure-Python twins only"
        )


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def twin(impl: str):
    return lambda name: _impl.twin(name, impl)


@pytest.fixture
def pair():
    """(compiled, pure) modules of one name; with no extension, (pure, pure)."""
    def get(name: str):
        py = _impl.twin(name, "python")
        cy = py if NO_EXT else _impl.twin(name, "cython")
        return cy, py

    return get


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses the broker gets the ``broker`` marker, so ``-m "not broker"``
    deselects exactly them where there is no Tansu binary (CI outside x86-64 Linux)."""
    for item in items:
        if "broker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)


@pytest.fixture(scope="session")
def broker():
    from kcodec.testing.tansu import Tansu

    with Tansu() as b:
        yield b


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def pytest_report_header(config: pytest.Config) -> str:
    return f"kcodec implementation: {_impl.IMPLEMENTATION}; twins under test: {', '.join(IMPLS)}"


def _hypothesis_profiles() -> None:
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # pragma: no cover - hypothesis is a test dependency
        return
    settings.register_profile("dev", max_examples=100, deadline=None)
    settings.register_profile(
        "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile("slow", max_examples=5000, deadline=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


_hypothesis_profiles()
