"""The outside reference data some tests read: log segments written by a real Kafka broker,
and Kafka's JSON message specs. They are not part of the repository (never commit them).

Where they are looked for:

* ``KCODEC_REFERENCE_DIR``: the ``reference`` directory (``segments/``,
  ``kafka-message-specs/``);
* ``KCODEC_SPECS``: the message specs directory alone (the spec checks need nothing else);
* ``KCODEC_SPECS_LATEST``: the newest specs directory alone (``kafka-message-specs-latest``,
  which the generated declarations are checked against);
* otherwise ``shared/reference`` beside the checkout, or beside the directory that holds it
  (where the checkout is a worktree in a folder of worktrees).

Tests that read them carry the ``reference`` marker (``reference("specs")`` or
``reference("specs-latest")`` when a specs copy is all they need). Where the data is absent they are skipped, and the run ends with one
line saying how many were not run and how to run them; ``KCODEC_REQUIRE_REFERENCE=1`` (CI
sets it) makes that a failure instead, as is a variable that names no directory. Where the
data is present, a file missing from it fails the test that wants it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import REPO

#: what a ``reference`` marker may ask for: the whole reference directory, or the specs
KINDS = ("segments", "specs", "specs-latest")

#: the specs kinds: their variable and their folder in the reference directory
_SPECS = {"specs": ("KCODEC_SPECS", "kafka-message-specs"),
          "specs-latest": ("KCODEC_SPECS_LATEST", "kafka-message-specs-latest")}


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def required() -> bool:
    """KCODEC_REQUIRE_REFERENCE=1: absent reference data fails the tests that need it."""
    return _truthy("KCODEC_REQUIRE_REFERENCE")


def candidates() -> list[Path]:
    """Where the reference directory is looked for when KCODEC_REFERENCE_DIR is not set."""
    return [REPO.parent / "shared" / "reference", REPO.parent.parent / "shared" / "reference"]


def reference_dir() -> Path | None:
    """The reference directory, or None where there is none (or the variable names a
    directory that does not exist: ``problem()`` says so)."""
    env = os.environ.get("KCODEC_REFERENCE_DIR")
    if env:
        return Path(env) if Path(env).is_dir() else None
    return next((c for c in candidates() if c.is_dir()), None)


def _specs(kind: str = "specs") -> Path | None:
    var, folder = _SPECS[kind]
    env = os.environ.get(var)
    if env:
        return Path(env) if Path(env).is_dir() else None
    ref = reference_dir()
    return None if ref is None else ref / folder


def problem(kind: str = "segments") -> str | None:
    """Why the reference data of ``kind`` is not available, or None when it is."""
    if kind not in KINDS:
        raise ValueError(f"reference marker: unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if kind in _SPECS and os.environ.get(_SPECS[kind][0]):
        var = _SPECS[kind][0]
        env = os.environ[var]
        return None if Path(env).is_dir() else f"{var}={env} is not a directory"
    env = os.environ.get("KCODEC_REFERENCE_DIR")
    if env:
        return None if Path(env).is_dir() else f"KCODEC_REFERENCE_DIR={env} is not a directory"
    if reference_dir() is None:
        return "no shared/reference beside the checkout, looked in " + \
            " and ".join(str(c) for c in candidates())
    return None


def explicit(kind: str = "segments") -> bool:
    """Whether a variable names where the data of ``kind`` is (then its absence is a
    mistake to report, never a reason to skip)."""
    if kind in _SPECS and os.environ.get(_SPECS[kind][0]):
        return True
    return bool(os.environ.get("KCODEC_REFERENCE_DIR"))


def skip_reason(kind: str = "segments") -> str | None:
    """Why a test that needs the data of ``kind`` is skipped, or None when it runs: only
    when the data is absent, no variable names it and KCODEC_REQUIRE_REFERENCE is off."""
    reason = problem(kind)
    if reason is None or required() or explicit(kind):
        return None
    return reason


def how_to_run() -> str:
    return ("set KCODEC_REFERENCE_DIR to a copy of the reference directory "
            "(or KCODEC_SPECS to the Kafka message specs, for the spec checks alone)")


def _unavailable(kind: str, reason: str) -> None:
    if explicit(kind):
        pytest.fail(f"{reason}: set it to the directory of the reference data", pytrace=False)
    if required():
        pytest.fail(f"KCODEC_REQUIRE_REFERENCE is set but the reference data is missing: "
                    f"{reason}; {how_to_run()}", pytrace=False)
    pytest.fail(f"this test reads the outside reference data ({kind}) but is not marked "
                f"@pytest.mark.reference, so it was not skipped where the data is absent "
                f"({reason})", pytrace=False)


def reference_file(relative: str) -> Path:
    """``relative`` inside the reference directory; a missing file fails the test (it is
    a fault of the reference copy, not a reason to skip)."""
    reason = problem("segments")
    if reason is not None:
        _unavailable("segments", reason)
    base = reference_dir()
    assert base is not None
    path = base / relative
    if not path.is_file():
        pytest.fail(f"reference file {relative} not found in {base}: the reference copy is "
                    "incomplete (KCODEC_REFERENCE_DIR chooses another)", pytrace=False)
    return path


def specs_dir(kind: str = "specs") -> Path:
    """Kafka's JSON message specs (KCODEC_SPECS, or ``kafka-message-specs`` in the
    reference directory); a reference directory without them fails the test."""
    reason = problem(kind)
    if reason is not None:
        _unavailable(kind, reason)
    specs = _specs(kind)
    assert specs is not None
    if not specs.is_dir():
        pytest.fail(f"Kafka message specs not found: {specs} is not a directory (set "
                    f"{_SPECS[kind][0]} to the specs directory)", pytrace=False)
    return specs


def latest_specs_dir() -> Path:
    """The newest Kafka message specs gathered (KCODEC_SPECS_LATEST, or
    ``kafka-message-specs-latest`` in the reference directory): the set the generated
    declarations are checked against."""
    return specs_dir("specs-latest")
