"""Stores are plug-ins: a registered store is a --storage choice, opened by its
from_settings with its own settings (a dataclass it declares: flags, variables and config
keys like the runtime's), grouped under its name in ``kcodec run --help``; help defaults
come from Settings and the stores' declarations, never restated."""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from kcodec.runtime.config import Settings
from kcodec.runtime.storage import STORES, open_store, register_store, store_names
from kcodec.runtime.storage.file import FileSettings
from kcodec.runtime.storage.redis import RedisSettings


@dataclass
class MemorySettings:
    memory_limit: int = field(default=5000, metadata={"help": "messages it holds at most"})
    memory_mode: str = field(default="fifo", metadata={"help": "fifo | lifo",
                                                       "choices": ("fifo", "lifo")})
    memory_token: str = field(default="", metadata={"help": "a secret", "secret": True})
    memory_strict: bool = field(default=False, metadata={"help": "refuse when full"})


class MemoryStore:
    """A store of the tests' own (enough of the protocol for opening it)."""

    kind = "memory"
    opened: list[tuple[str, bool, Any]] = []

    @classmethod
    def from_settings(cls, settings: Any, owner: str, quick: bool = False, *,
                      config: Any = None) -> MemoryStore:
        cls.opened.append((owner, quick, config))
        return cls()


@pytest.fixture
def memory_store():
    register_store("memory", f"{__name__}:MemoryStore", "in this process, for tests",
                   MemorySettings)
    yield
    del STORES["memory"]


def test_a_registered_store_is_a_storage_choice(memory_store) -> None:
    assert store_names() == ("direct", "file", "redis", "memory")
    s = Settings(topics=["t"], group="g", storage="memory")
    st = open_store(s, "p0", quick=True)
    assert isinstance(st, MemoryStore) and MemoryStore.opened[-1] == ("p0", True,
                                                                      MemorySettings())
    from kcodec.cli import run as cli_run

    p = argparse.ArgumentParser()
    cli_run.add_arguments(p)
    text = p.format_help()
    assert "--storage memory:" in text and "in this process, for tests" in text
    flat = " ".join(text.split())
    assert "direct, file, redis, memory" in flat
    memory = flat.split("--storage memory:", 1)[1]
    assert "--memory-limit MEMORY_LIMIT messages it holds at most (default 5000)" in memory
    assert "--memory-mode MEMORY_MODE fifo | lifo (default fifo)" in memory


def test_a_stores_settings_come_from_every_source(memory_store, tmp_path) -> None:
    """Its own settings by flag, variable and config key, as the runtime's; checked by
    their declaration (type, choices) whichever store is chosen; handed to its factory."""
    f = tmp_path / "run.toml"
    f.write_text('storage = "memory"\nmemory-mode = "lifo"\nmemory_limit = 7\n')
    s = Settings.build(file=str(f), env={"KCODEC_RUN_MEMORY_LIMIT": "9"},
                       overrides={"topics": ["t"], "group": "g", "memory_token": "tok3n"})
    assert s.store_settings() == MemorySettings(9, "lifo", "tok3n")
    open_store(s, "s1")
    assert MemoryStore.opened[-1] == ("s1", False, MemorySettings(9, "lifo", "tok3n"))
    assert s.shown()["memory_token"] == "***" and s.secrets() == ["tok3n"]
    assert Settings(**s.to_dict()) == s            # a child process gets them back
    from kcodec.cli import run as cli_run

    p = argparse.ArgumentParser()
    cli_run.add_arguments(p)
    args = p.parse_args(["h:f", "--memory-limit", "3", "--memory-strict", "yes"])
    assert (args.memory_limit, args.memory_strict) == (3, True)
    assert Settings.build(env={"KCODEC_RUN_MEMORY_STRICT": "on"}).stores["memory"].memory_strict
    with pytest.raises(ValueError, match="--memory-strict must be true or false, got 'x'"):
        Settings.build(env={}, overrides={"memory_strict": "x"})
    with pytest.raises(SystemExit):
        p.parse_args(["h:f", "--memory-limit", "x"])        # an int, as argparse checks
    for bad, words in [({"memory_mode": "x"}, "--memory-mode must be one of fifo, lifo"),
                       ({"memory_limit": -1}, "--memory-limit must be a non-negative integer")]:
        with pytest.raises(ValueError, match=words):
            Settings.build(env={}, overrides=bad)
    with pytest.raises(ValueError, match="KCODEC_RUN_MEMORY_LIMIT: expected int"):
        Settings.build(env={"KCODEC_RUN_MEMORY_LIMIT": "x"})
    with pytest.raises(ValueError, match="unknown setting 'memory_size' of the store 'memory'"):
        Settings(stores={"memory": {"memory_size": 1}})


def test_a_store_setting_name_belongs_to_one_owner(memory_store) -> None:
    from kcodec.runtime.storage import setting_owners

    @dataclass
    class Clash:
        fsync: str = "always"

    register_store("clash", f"{__name__}:MemoryStore", "no", Clash)
    try:
        with pytest.raises(ValueError, match="'file' and 'clash' both declare the setting "
                                             "'fsync'"):
            setting_owners()
    finally:
        del STORES["clash"]


def test_the_built_in_store_settings_keep_their_names_and_errors(tmp_path) -> None:
    """--fsync, --fsync-interval-ms, --redis-url, --redis-prefix, --redis-durability: the
    same flags, variables, config keys, defaults and errors as when they were the
    runtime's."""
    f = tmp_path / "run.toml"
    f.write_text('fsync = "interval"\nredis-prefix = "p"\n')
    s = Settings.build(file=str(f), env={"KCODEC_RUN_FSYNC_INTERVAL_MS": "50",
                                         "KCODEC_RUN_REDIS_URL": "redis://:pw@h:1/2"},
                       overrides={"redis_durability": "warn"})
    assert s.store_settings("file") == FileSettings("interval", 50)
    assert s.store_settings("redis") == RedisSettings("redis://:pw@h:1/2", "p", "warn")
    assert s.store_settings() == s.store_settings("file")       # the default store
    shown = s.shown()
    assert (shown["fsync"], shown["fsync_interval_ms"], shown["redis_url"]) == \
        ("interval", 50, "redis://:***@h:1/2")
    assert "pw" in s.secrets()
    assert Settings.build(env={}, defaults=shown).store_settings("redis").redis_prefix == "p"
    assert Settings().stores == {"file": FileSettings(), "redis": RedisSettings()}
    for bad, words in [({"fsync": "sometimes"}, "--fsync must be one of always, interval, "
                                                "never, got 'sometimes'"),
                       ({"fsync_interval_ms": -1}, "--fsync-interval-ms must be a "
                                                   "non-negative integer, got -1"),
                       ({"redis_durability": "maybe"}, "--redis-durability must be one of "
                                                       "require, warn, got 'maybe'")]:
        with pytest.raises(ValueError, match=words):
            Settings.build(env={}, overrides=bad)
    with pytest.raises(ValueError, match="KCODEC_RUN_FSYNC_INTERVAL_MS: expected int"):
        Settings.build(env={"KCODEC_RUN_FSYNC_INTERVAL_MS": "soon"})


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
    own_help = [(f.name.replace("_", "-"), f.metadata["help"])
                for cls in (FileSettings, RedisSettings) for f in dataclasses.fields(cls)]
    fields.update({f.name: f.default for cls in (FileSettings, RedisSettings)
                   for f in dataclasses.fields(cls)})
    for flag, own in [(flag, own) for flag, _kind, own in cli_run._OPTIONS] + own_help:
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
