"""Shared fixtures: both twins in one process, and the real broker.

* ``impl`` is parametrized over every implementation this run covers: "cython" and
  "python" normally, "python" only when KCODEC_NO_EXTENSIONS=1. A run that expects the
  extension but cannot load it stops with an error instead of quietly testing less.
* ``twin(name)`` returns module ``name`` of the current ``impl``.
* ``pair(name)`` returns ``(cython_module, python_module)`` for differential tests.
* ``broker`` is one Tansu broker for the whole session (tests use fresh topic names); under
  pytest-xdist one per worker process, each on a free port.
* Tests under the folders of tests/support/twin_selection.py get the ``twins`` marker: the
  pure-twin pass of CI runs them (``-m "twins and not slow"``).
* Tests marked ``reference`` read the outside reference data (tests/support/reference.py):
  skipped where it is absent, with one line at the end of the run saying how many and how
  to run them; KCODEC_REQUIRE_REFERENCE=1 makes absence a failure.
* Every in-process ``Cluster`` of the suite forms classic groups at once
  (``group.initial.rebalance.delay.ms=0`` in ``Cluster.base_config``) and lets classic
  members ask for session timeouts down to 100 ms (``group.min.session.timeout.ms=100``),
  as Kafka's own consumer integration tests set them; Kafka's defaults (3000 and 6000) stay
  the broker's defaults, and the tests of those defaults clear the base config.
* At each test module's start the process collects the garbage the modules before it left
  and freezes what is alive (``gc.freeze()``): later full collections walk only what was
  made since, not the whole run's heap.
* SIGINT is handled as Python's default in this process (and so in every process the
  tests start), whatever disposition the run inherited: a suite started in the background
  by a script inherits SIGINT ignored, and the tests of Ctrl-C behaviour would then test
  nothing.
"""

from __future__ import annotations

import gc
import os
import signal
import uuid

import pytest

from kcodec import _impl
from tests.support import REPO, module_costs, reference
from tests.support.twin_selection import in_twin_dirs

NO_EXT = _impl._truthy("KCODEC_NO_EXTENSIONS")
IMPLS = ["python"] if NO_EXT else _impl.twins()


#: the tests skipped for want of the reference data: their node ids, and how many ran so
REFERENCE_SKIPS = pytest.StashKey[set]()
REFERENCE_SKIPPED_IDS: list[str] = []
REFERENCE_SKIP = "needs the outside reference data"


def pytest_configure(config: pytest.Config) -> None:
    from kcodec.broker.cluster import Cluster

    Cluster.base_config["group.initial.rebalance.delay.ms"] = 0
    Cluster.base_config["group.min.session.timeout.ms"] = 100
    # Children get SIGINT's default disposition only if this process handles it (a handled
    # signal is reset to the default at exec; an ignored one stays ignored).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.stash[REFERENCE_SKIPS] = set()
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
    deselects exactly them where there is no Tansu binary (CI outside x86-64 Linux); every
    test in a folder of the pure-twin pass gets the ``twins`` marker."""
    skips = config.stash[REFERENCE_SKIPS]
    for item in items:
        if "broker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.broker)
        try:
            rel = item.path.relative_to(REPO).as_posix()
        except ValueError:
            rel = ""
        if in_twin_dirs(rel):
            item.add_marker(pytest.mark.twins)
        mark = item.get_closest_marker("reference")
        if mark is not None and reference.skip_reason(*mark.args) is not None:
            skips.add(item.nodeid)
    if hasattr(config, "workerinput"):
        # under pytest-xdist (--dist loadfile --no-loadscope-reorder hands out modules in
        # this order) the costliest modules go first, so the run does not end with one
        # worker alone on a long one (tests/support/module_costs.py); every worker sorts
        # alike, as xdist requires, and a module's tests keep their order
        costs = module_costs.load()
        items.sort(key=lambda item: -module_costs.cost(item.nodeid.split("::", 1)[0], costs))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile, but the modules of ``module_costs.SAME_WORKER`` go to one worker as
    one unit (they share a session fixture that two workers would each make)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return module_costs.unit(super()._split_scope(nodeid))

    return SharedFixtureScheduling(config, log)


_heap_frozen_for: list = [None]     # the module the heap was last frozen at


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.module is not _heap_frozen_for[0]:
        # A module's first test: collect what the modules before it left (only objects
        # made since the last freeze are walked: milliseconds), then freeze the rest out
        # of the cyclic GC's sight. A worker holds 300-500k objects by mid-run (the
        # collected items, the imports, session fixtures); each full collection walked
        # them all, 20 s of a 50 s run of tests/protocol, records and codec on 2 workers.
        # Frozen objects are still freed by their reference counts.
        _heap_frozen_for[0] = item.module
        gc.collect()
        gc.freeze()
    if item.nodeid in item.config.stash[REFERENCE_SKIPS]:
        # raised here rather than by a skip marker: -ra then shows one line for them all
        mark = item.get_closest_marker("reference")
        assert mark is not None
        pytest.skip(f"{REFERENCE_SKIP}: {reference.skip_reason(*mark.args)}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # counted from the reports, which reach the process that prints the summary under
    # pytest-xdist too (the workers' stash does not)
    if (report.skipped and isinstance(report.longrepr, tuple)
            and REFERENCE_SKIP in str(report.longrepr[2])):
        REFERENCE_SKIPPED_IDS.append(report.nodeid)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's last line (after pytest's counts): how many tests wanted the outside
    reference data and were skipped, and how to run them."""
    terminalreporter = config.pluginmanager.get_plugin("terminalreporter")
    n = len(REFERENCE_SKIPPED_IDS)
    if n and terminalreporter is not None:
        were = "tests needed the outside reference data and were" if n != 1 else \
            "test needed the outside reference data and was"
        terminalreporter.write_line(f"{n} {were} not run ({reference.problem()}); "
                                    f"to run them, {reference.how_to_run()}")


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
