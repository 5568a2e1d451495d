"""Helpers the tests share: harnesses for outside brokers and peers, fake brokers, record
and protocol builders. Nothing here is a test; the package mirrors no part of kcodec."""

from pathlib import Path

#: the checkout's root directory (the parent of ``tests``)
REPO = Path(__file__).resolve().parents[2]


def project_text(*parts: str) -> str:
    """The text of a checkout file the tests read (``README.md``, ``docs/guide/...``). Where
    only ``tests/`` was copied beside an installed wheel (cibuildwheel's test step: no
    setup.py either) the test is skipped, saying so; in a checkout a missing file fails."""
    import pytest

    path = REPO.joinpath(*parts)
    if not path.exists() and not (REPO / "setup.py").exists():
        pytest.skip(f"{'/'.join(parts)} is not beside the tests (an installed wheel's test step)")
    return path.read_text(encoding="utf-8")
