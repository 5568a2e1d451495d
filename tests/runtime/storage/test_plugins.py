"""Another package's store: an entry point of the group kcodec.run.stores names its
StoreKind, registered the first time the registry is read, before ``kcodec run`` parses
its arguments; a broken one is named in a warning (and in the error when chosen), and the
built-in stores stay. The packages here are fake distributions in a temporary directory
on sys.path (a *.dist-info with METADATA and entry_points.txt): no network, no pip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kcodec.runtime import storage
from kcodec.runtime.config import Settings
from tests.runtime.support import ROOT, env

# a plug-in's light module: its settings and its StoreKind (the store class elsewhere,
# imported only when chosen)
PLUGIN = '''
from dataclasses import dataclass, field

from kcodec.runtime.storage import StoreKind


@dataclass
class TubeSettings:
    tube_size: int = field(default=64, metadata={"help": "messages a tube holds"})
    tube_colour: str = field(default="red", metadata={"help": "red | blue",
                                                     "choices": ("red", "blue")})


STORE = StoreKind("tube", "kcodec_tube.impl:TubeStore", "a store from another package",
                  TubeSettings)
NOT_A_STORE = 42
'''

IMPL = '''
class TubeStore:
    kind = "tube"

    @classmethod
    def from_settings(cls, settings, owner, quick=False, *, config=None):
        store = cls()
        store.config = config
        return store
'''


def fake_distribution(root: Path, entry_points: str, name: str = "kcodec-tube") -> Path:
    """``root`` holding the package kcodec_tube and a distribution ``name`` whose
    entry_points.txt has ``entry_points`` under [kcodec.run.stores]."""
    pkg = root / "kcodec_tube"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(PLUGIN)
    (pkg / "impl.py").write_text(IMPL)
    info = root / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[kcodec.run.stores]\n{entry_points}\n")
    return root


@pytest.fixture
def discover(monkeypatch):
    """Discovery afresh with the given directory on sys.path; the registry as it was
    afterwards."""
    before, broken = dict(storage.STORES), dict(storage.BROKEN)

    def go(root: Path) -> dict[str, storage.StoreKind]:
        monkeypatch.syspath_prepend(str(root))
        monkeypatch.setattr(storage, "_discovered", False)
        return storage.stores()

    yield go
    for mod in [m for m in sys.modules if m.startswith("kcodec_tube")]:
        del sys.modules[mod]
    storage.STORES.clear()
    storage.STORES.update(before)
    storage.BROKEN.clear()
    storage.BROKEN.update(broken)


def test_an_entry_point_registers_its_store_and_settings(tmp_path, discover) -> None:
    found = discover(fake_distribution(tmp_path, "tube = kcodec_tube:STORE"))
    assert list(found) == ["file", "redis", "tube"] and not storage.BROKEN
    assert "kcodec_tube.impl" not in sys.modules        # the store's class: when chosen
    s = Settings.build(env={"KCODEC_RUN_TUBE_SIZE": "8"},
                       overrides={"topics": ["t"], "group": "g", "storage": "tube",
                                  "tube_colour": "blue"})
    st = storage.open_store(s, "p0")
    assert type(st).__name__ == "TubeStore"
    assert (st.config.tube_size, st.config.tube_colour) == (8, "blue")   # type: ignore[attr-defined]


def test_python_settings_find_a_plugins_settings_first(tmp_path, discover,
                                                       monkeypatch) -> None:
    """``kcodec.runtime.run(handle, tube_size=...)``: Settings.build is the first to read
    the registry."""
    monkeypatch.syspath_prepend(str(fake_distribution(tmp_path, "tube = kcodec_tube:STORE")))
    monkeypatch.setattr(storage, "_discovered", False)
    s = Settings.build(env={}, overrides={"storage": "tube", "tube_size": 3})
    assert s.store_settings().tube_size == 3


def test_a_broken_entry_point_is_named_and_the_built_ins_stay(tmp_path, discover,
                                                             caplog) -> None:
    root = fake_distribution(tmp_path / "a", "tube = kcodec_tube:NOT_A_STORE")
    fake_distribution(root, "gone = kcodec_no_such_module:STORE", name="kcodec-gone")
    found = discover(root)
    assert list(found) == ["file", "redis"]
    assert "tube = kcodec_tube:NOT_A_STORE (entry point group kcodec.run.stores, " \
           "distribution kcodec-tube) cannot be loaded: TypeError: it names a int, not a " \
           "kcodec.runtime.storage.StoreKind" in storage.BROKEN["tube"]
    assert "gone = kcodec_no_such_module:STORE" in storage.BROKEN["gone"]
    assert "ModuleNotFoundError" in storage.BROKEN["gone"]
    assert "the store plug-in gone = kcodec_no_such_module:STORE" in caplog.text
    Settings(storage="file")                                    # the built-ins work
    with pytest.raises(ValueError, match=r"--storage must be one of direct, file, redis, "
                                         r"got 'gone' \(the store plug-in gone = "):
        Settings(storage="gone")


def test_an_entry_point_may_not_take_a_built_in_name_or_setting(tmp_path, discover) -> None:
    root = fake_distribution(tmp_path, "redis = kcodec_tube:STORE\ntube = kcodec_tube:STORE")
    (root / "kcodec_tube" / "__init__.py").write_text(
        PLUGIN.replace("tube_size: int", "redis_url: int"))
    assert list(discover(root)) == ["file", "redis"]
    assert storage.STORES["redis"].opener.endswith("redis:RedisStore")
    assert "a store called 'redis' is already registered" in storage.BROKEN["redis"]
    assert "'redis' and 'tube' both declare the setting 'redis_url'" in storage.BROKEN["tube"]


def run_kcodec(root: Path, *argv: str) -> subprocess.CompletedProcess:
    extra = {"PYTHONPATH": f"{root}:{ROOT}"}
    return subprocess.run([sys.executable, "-m", "kcodec", "run", *argv], env=env(**extra),
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_kcodec_run_offers_a_plugin_store_before_parsing(tmp_path) -> None:
    root = fake_distribution(tmp_path, "tube = kcodec_tube:STORE")
    text = " ".join(run_kcodec(root, "--help").stdout.split())
    assert "--storage tube: a store from another package" in text
    assert "--tube-size TUBE_SIZE messages a tube holds (default 64)" in text
    assert "choices: direct, file, redis, tube" in text
    out = run_kcodec(root, "x:y", "-t", "a", "-g", "g", "--storage", "tube", "--tube-size",
                     "3", "--print-config")
    assert out.returncode == 0, out.stderr
    assert '"tube_size": 3' in out.stdout and '"tube_colour": "red"' in out.stdout


def test_kcodec_run_with_a_broken_plugin(tmp_path) -> None:
    root = fake_distribution(tmp_path, "tube = kcodec_tube:NOPE")
    out = run_kcodec(root, "x:y", "-t", "a", "-g", "g", "--print-config")
    assert out.returncode == 0, out.stderr          # the file store, as if it were not there
    assert "the store plug-in tube = kcodec_tube:NOPE" in out.stderr
    assert "AttributeError" in out.stderr and "Traceback" not in out.stderr
    out = run_kcodec(root, "x:y", "-t", "a", "-g", "g", "--storage", "tube")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--storage must be one of direct, file, redis, got 'tube' (the store plug-in " \
           "tube = kcodec_tube:NOPE" in out.stderr
