"""Stores are plug-ins: a registered store is a --storage choice, opened by its
from_settings, with its settings grouped under its name in ``kcodec run --help``; help
defaults come from Settings, never restated."""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import Any

import pytest

from kcodec.runtime.config import Settings
from kcodec.runtime.storage import STORES, open_store, register_store, store_names


class MemoryStore:
    """A store of the tests' own (enough of the protocol for opening it)."""

    kind = "memory"
    opened: list[tuple[str, bool]] = []

    @classmethod
    def from_settings(cls, settings: Any, owner: str, quick: bool = False) -> MemoryStore:
        cls.opened.append((owner, quick))
        return cls()


@pytest.fixture
def memory_store():
    register_store("memory", f"{__name__}:MemoryStore", "in this process, for tests",
                   ("batch_size",))
    yield
    del STORES["memory"]


def test_a_registered_store_is_a_storage_choice(memory_store) -> None:
    assert store_names() == ("direct", "file", "redis", "memory")
    s = Settings(topics=["t"], group="g", storage="memory")
    st = open_store(s, "p0", quick=True)
    assert isinstance(st, MemoryStore) and MemoryStore.opened[-1] == ("p0", True)
    from kcodec.cli import run as cli_run

    p = argparse.ArgumentParser()
    cli_run.add_arguments(p)
    text = p.format_help()
    assert "--storage memory:" in text and "in this process, for tests" in text
    assert "direct, file, redis, memory" in " ".join(text.split())


def test_an_unknown_store_names_the_choices() -> None:
    with pytest.raises(ValueError, match="--storage must be one of direct, file, redis"):
        Settings(storage="memory")
    with pytest.raises(ValueError, match="an identifier other than 'direct'"):
        register_store("direct", "x:Y", "no")


def test_help_defaults_are_read_from_settings() -> None:
    from kcodec.cli import run as cli_run

    p = argparse.ArgumentParser()
    cli_run.add_arguments(p)
    text = " ".join(p.format_help().split())
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    for flag, _kind, own in cli_run._OPTIONS:
        default = fields[flag.replace("-", "_")]
        # the option's own text never restates a constant default ...
        assert not re.search(r"\(default [^<)]*\)", own), flag
        # ... the help shows the one Settings holds
        if default is not dataclasses.MISSING and default not in (None, "", 0) or \
                isinstance(default, float):
            shown = f"{default:g}" if isinstance(default, float) else str(default)
            entry = text.rsplit(f"--{flag} {flag.replace('-', '_').upper()} ", 1)[1]
            entry = re.split(r" --[a-z-]+ [A-Z_]+ ", entry, maxsplit=1)[0]
            assert f"(default {shown}" in entry, flag
