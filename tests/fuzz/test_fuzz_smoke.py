"""Fast differential fuzz smoke test: every fuzz target on a few hundred mutated inputs.

The targets (fuzz/targets.py) decode each input with the compiled and the pure twin and
fail on a leaked non-kcodec exception, a twin disagreement (value, or exception class and
message) or a broken bound. Inputs are mutants of the code-generated seeds
(fuzz/seeds.py) from fixed random seeds, so a failure reproduces exactly; the failing input
is in the assertion message. The whole file takes a few seconds; the slow-marked test
runs the same targets on hypothesis-generated inputs for longer.
"""

from __future__ import annotations

import pytest

from fuzz.mutate import mutants, mutate
from fuzz.seeds import SEEDS
from fuzz.targets import TARGETS, Finding, memory_cap
from tests.support import REPO

# inputs per target (LogSegment writes temporary files: fewer)
COUNTS = {"segment": 60, "dumplog": 20, "dumplogdir": 20, "sparklog": 20, "sparkkafka": 100,
          "columns": 250,
          "protocol": 400, "broker": 150}
# targets over an optional dependency: the module they need
NEEDS = {"sparklog": "pyspark", "sparkkafka": "pyspark"}
DEFAULT_COUNT = 300
RANDOM_SEED = 20261121


@pytest.fixture(scope="module")
def seeds() -> dict[str, list[bytes]]:
    return {name: make() for name, make in SEEDS.items()}


@pytest.fixture(scope="module", autouse=True)
def _stop_the_broker_target():
    """The broker target runs a broker in this process: stop it after this module."""
    yield
    from fuzz.broker_target import shutdown

    shutdown()


@pytest.fixture(autouse=True)
def _address_space_limit():
    """An allocation the input does not justify fails as MemoryError (a Finding)."""
    with memory_cap(2 << 30):
        yield


def run_all(name: str, inputs: list[bytes]) -> None:
    for data in inputs:
        try:
            TARGETS[name](data)
        except Finding as exc:
            raise AssertionError(f"{name} input {data.hex()}:\n{exc}") from exc


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_targets_on_mutated_seeds(name: str, seeds: dict[str, list[bytes]]) -> None:
    if name in NEEDS:
        pytest.importorskip(NEEDS[name], reason=f"the {name} target needs {NEEDS[name]}")
    run_all(name, mutants(seeds[name], COUNTS.get(name, DEFAULT_COUNT), RANDOM_SEED))


def test_every_target_has_seeds(seeds: dict[str, list[bytes]]) -> None:
    assert set(seeds) == set(TARGETS)
    assert all(seeds[name] for name in TARGETS)


def test_mutator_is_deterministic(seeds: dict[str, list[bytes]]) -> None:
    assert mutants(seeds["records"], 50, 1) == mutants(seeds["records"], 50, 1)
    assert mutants(seeds["records"], 50, 1) != mutants(seeds["records"], 50, 2)


CORPUS = REPO / "fuzz" / "corpus"


def _corpus(name: str) -> list[bytes]:
    d = CORPUS / name
    return [p.read_bytes() for p in sorted(d.iterdir())] if d.is_dir() else []


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_committed_corpus(name: str) -> None:
    """The minimized corpus from the long runs (fuzz/corpus/<target>, fuzz/campaign.sh):
    every input passes its target in both twins, and a few of its mutants too."""
    inputs = _corpus(name)
    assert inputs, f"fuzz/corpus/{name} is missing or empty (run fuzz/campaign.sh)"
    if name in NEEDS:
        pytest.importorskip(NEEDS[name], reason=f"the {name} target needs {NEEDS[name]}")
    run_all(name, inputs[:COUNTS.get(name, DEFAULT_COUNT)])
    run_all(name, mutants(inputs, 40, RANDOM_SEED))


def test_a_finding_is_reported() -> None:
    # The harness itself must be able to fail: a target over a twin that leaks.
    from fuzz import targets

    with pytest.raises(Finding, match="leaked IndexError"):
        targets.call("demo", lambda: b""[1])
    with pytest.raises(Finding, match="twins disagree"):
        targets.same("demo", ("ok", 1), ("ok", 2), b"\x00")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_targets_hypothesis(name: str, seeds: dict[str, list[bytes]]) -> None:
    """Longer run: random bytes and stacked mutations of the seeds, hypothesis-driven."""
    import random

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    pool = seeds[name]

    if name in NEEDS:
        pytest.importorskip(NEEDS[name], reason=f"the {name} target needs {NEEDS[name]}")

    @settings(max_examples={"segment": 300, "dumplog": 100, "dumplogdir": 100,
                            "sparklog": 100, "sparkkafka": 300}.get(name, 1000), deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(
        st.binary(max_size=600),
        st.tuples(st.integers(0, len(pool) - 1), st.integers(0, 2**32), st.integers(1, 8))
        .map(lambda t: _stacked(pool[t[0]], t[1], t[2], random)),
    ))
    def check(data: bytes) -> None:
        run_all(name, [data])

    check()


def _stacked(seed: bytes, rs: int, depth: int, random) -> bytes:
    rng = random.Random(rs)
    for _ in range(depth):
        seed = mutate(seed, rng)
    return seed
