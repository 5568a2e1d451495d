"""Packaging: the sdist, the compiled wheel and the pure wheel build, install and import.

The slow tests build the sdist and, from it, the compiled wheel (``python -m build``,
without isolation: the build requirements are already in the test environment) and the
pure wheel (``KCODEC_NO_EXTENSIONS=1``), then install each into a fresh venv of its own and
import it from a directory outside the source tree. The sdist is also installed the way a
user without a wheel gets it: ``pip install kcodec-X.tar.gz`` with build isolation, fetching
setuptools and Cython through the configured package index (nothing pre-installed).

The venvs are made without pip (``venv --without-pip``) and filled by this environment's
pip (``pip --python``), which saves installing pip into each. kcodec itself is installed
from the files just built (a path, never a name an index could answer); its runtime
dependencies come through the configured index, so the declared dependencies are what is
tested.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from kcodec import _impl

ROOT = Path(__file__).resolve().parents[2]
IGNORED_PIP_NOISE = ("is ignored: it is neither a file nor a directory",)


# -- helpers ----------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    """This environment without anything that would steer kcodec or Python imports. CI's
    KCODEC_WERROR stays (a warning fails these builds too), and so does CC: the test
    command's ccache (scripts/_setup.sh) then serves each build from the in-place one's
    compiles, which were made with the same flags."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("KCODEC_") or k == "KCODEC_WERROR")
        and k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=str(cwd), env=env or _env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    if check and proc.returncode != 0:
        lines = [ln for ln in proc.stdout.splitlines() if not any(n in ln for n in IGNORED_PIP_NOISE)]
        pytest.fail(f"exit {proc.returncode}: {' '.join(map(str, cmd))}\n" + "\n".join(lines[-60:]))
    return proc


def _venv(path: Path) -> Path:
    """A fresh venv without pip; returns its python."""
    _run([sys.executable, "-m", "venv", "--without-pip", path], cwd=path.parent)
    scripts = path / ("Scripts" if os.name == "nt" else "bin")
    return scripts / ("python.exe" if os.name == "nt" else "python")


def _pip_install(python: Path, *args: object, cwd: Path, **env: str) -> None:
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", *args], cwd=cwd,
         env=_env(**env))


def _implementation(python: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    code = "import kcodec; print(kcodec.IMPLEMENTATION, kcodec.__file__)"
    return _run([python, "-c", code], cwd=cwd, env=_env(**env), check=False)


def _wheel_tags(wheel: Path) -> tuple[str, list[str]]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL"))
        meta = zf.read(name).decode()
    purelib = next(ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Root-Is-Purelib"))
    tags = [ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Tag:")]
    return purelib, tags


def _binaries(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith((".so", ".pyd", ".dylib", ".dll"))]


def _pyx_modules() -> list[str]:
    return sorted(p.stem for p in (ROOT / "kcodec" / "_cy").glob("*.pyx"))


# -- fixtures: build once per session ---------------------------------------------------


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist, and the compiled wheel built from it (as `python -m build` does)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT], cwd=out,
         env=_env(KCODEC_BUILD_JOBS="2"))
    (sdist,) = out.glob("kcodec-*.tar.gz")
    (wheel,) = out.glob("kcodec-*.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="session")
def pure_wheel(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The KCODEC_NO_EXTENSIONS=1 wheel, built from the unpacked sdist (a clean tree)."""
    work = tmp_path_factory.mktemp("pure")
    with tarfile.open(dists["sdist"]) as tf:
        tf.extractall(work)
    (src,) = [p for p in work.iterdir() if p.is_dir()]
    out = work / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", out, src],
         cwd=work, env=_env(KCODEC_NO_EXTENSIONS="1"))
    (wheel,) = out.glob("kcodec-*.whl")
    return wheel


@pytest.fixture(scope="session")
def wheel_venv(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the compiled wheel installed; returns its python."""
    base = tmp_path_factory.mktemp("venv-wheel")
    python = _venv(base / "venv")
    _pip_install(python, dists["wheel"], cwd=base)
    return python


# -- fast checks ------------------------------------------------------------------------


@pytest.mark.skipif(not (ROOT / "setup.py").exists(),
                    reason="needs setup.py: tests/ runs here outside the source tree (as in cibuildwheel)")
def test_build_and_run_time_read_kcodec_no_extensions_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """setup.py's switch and kcodec._impl's switch agree on every spelling."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_truthy"]
    namespace: dict[str, object] = {"os": os}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "setup.py", "exec"), namespace)
    setup_truthy = namespace["_truthy"]
    for value in ["", "0", "false", "False", "no", "off", " 0 ", "1", "true", "yes", "on", "2"]:
        monkeypatch.setenv("KCODEC_TEST_SWITCH", value)
        assert setup_truthy("KCODEC_TEST_SWITCH") == _impl._truthy("KCODEC_TEST_SWITCH"), value
    monkeypatch.delenv("KCODEC_TEST_SWITCH")
    assert setup_truthy("KCODEC_TEST_SWITCH") is False
    assert _impl._truthy("KCODEC_TEST_SWITCH") is False


# -- slow: build, install, import -------------------------------------------------------


@pytest.mark.slow
def test_sdist_has_the_sources_and_not_the_generated_c(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    for required in ["setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "PKG-INFO",
                     "tests/conftest.py", "kcodec/py.typed"]:
        assert required in names, required
    for pattern in ["kcodec/_cy/*.pyx", "kcodec/_cy/*.pxd", "src_c/*", "tests/*.py"]:
        for path in ROOT.glob(pattern):
            assert path.relative_to(ROOT).as_posix() in names, path
    generated = [n for n in names if n.startswith("kcodec/_cy/") and n.endswith((".c", ".cpp"))]
    assert not generated, f"cythonize output in the sdist: {generated}"
    assert not _binaries(sorted(names))


@pytest.mark.slow
def test_compiled_wheel_installs_and_loads_the_compiled_twins(
    dists: dict[str, Path], wheel_venv: Path, tmp_path: Path
) -> None:
    wheel = dists["wheel"]
    purelib, tags = _wheel_tags(wheel)
    assert purelib == "false"
    assert tags and all(not t.endswith("-none-any") for t in tags), tags
    with zipfile.ZipFile(wheel) as zf:
        built = {Path(n).name.split(".")[0] for n in _binaries(zf.namelist())}
    assert built == set(_pyx_modules())

    proc = _implementation(wheel_venv, tmp_path, KCODEC_REQUIRE_EXTENSIONS="1")
    assert proc.returncode == 0, proc.stdout
    impl, location = proc.stdout.split()
    assert impl == "cython"
    assert Path(location).resolve().is_relative_to(wheel_venv.parent.parent.resolve())
    # and the run-time switch still selects the pure twins in a compiled install
    assert _implementation(wheel_venv, tmp_path, KCODEC_NO_EXTENSIONS="1").stdout.split()[0] == "python"
    # the console script is installed and runs
    script = wheel_venv.parent / ("kcodec.exe" if os.name == "nt" else "kcodec")
    assert "kcodec " in _run([script, "--version"], cwd=tmp_path).stdout


@pytest.mark.slow
def test_pure_wheel_is_py3_none_any_and_imports_as_python(pure_wheel: Path, tmp_path: Path) -> None:
    assert pure_wheel.name.endswith("-py3-none-any.whl"), pure_wheel.name
    purelib, tags = _wheel_tags(pure_wheel)
    assert (purelib, tags) == ("true", ["py3-none-any"])
    with zipfile.ZipFile(pure_wheel) as zf:
        assert not _binaries(zf.namelist())

    python = _venv(tmp_path / "venv")
    _pip_install(python, pure_wheel, cwd=tmp_path)
    proc = _implementation(python, tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.split()[0] == "python"
    # CI's guard: requiring the extension from a pure install fails loudly at import
    proc = _implementation(python, tmp_path, KCODEC_REQUIRE_EXTENSIONS="1")
    assert proc.returncode != 0
    assert "ImportError" in proc.stdout and "KCODEC_REQUIRE_EXTENSIONS" in proc.stdout


@pytest.mark.slow
def test_sdist_installs_with_build_isolation_on_a_fresh_venv(
    dists: dict[str, Path], tmp_path: Path
) -> None:
    """`pip install kcodec-X.tar.gz` (what `pip install .` does too): pip makes an isolated
    build environment from pyproject's [build-system] requires and compiles the extension."""
    python = _venv(tmp_path / "venv")
    # This checks the build requirements, not the flags: without a compiler cache it
    # compiles at -O0 (KCODEC_DEBUG) on two cores; with one (the test command's ccache),
    # at the release flags, which the cache holds from the builds before.
    fast = {} if "ccache" in os.environ.get("CC", "") else {"KCODEC_DEBUG": "1"}
    _pip_install(python, dists["sdist"], cwd=tmp_path, KCODEC_BUILD_JOBS="2", **fast)
    proc = _implementation(python, tmp_path, KCODEC_REQUIRE_EXTENSIONS="1")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.split()[0] == "cython"


@pytest.mark.slow
def test_cibuildwheel_test_step_works_against_the_installed_wheel(
    wheel_venv: Path, tmp_path: Path
) -> None:
    """What cibuildwheel does after building each wheel, from pyproject's [tool.cibuildwheel]:
    install test-requires, copy test-sources into an empty directory, run test-command there
    with test-environment (and nothing else of ours: no source tree, no peers, hypothesis's
    default profile). This is the check that every test module imports with only
    test-requires installed (all are collected) and that the codec's tests pass against
    the installed wheel; the wheel builders run the whole command."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib  # a test dependency on Python < 3.11
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    _pip_install(wheel_venv, *cfg["test-requires"], cwd=tmp_path)
    for source in cfg["test-sources"]:
        src = ROOT / source
        if src.is_dir():
            shutil.copytree(src, tmp_path / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, tmp_path / source)
    bindir = str(wheel_venv.parent)
    env = _env(PATH=bindir + os.pathsep + os.environ.get("PATH", ""), **cfg["test-environment"])
    env.pop("HYPOTHESIS_PROFILE", None)
    commands = cfg["test-command"]
    commands = [commands] if isinstance(commands, str) else commands
    for command in commands:
        runs = [command]
        if "pytest" in command and " tests " in command:
            # here, after the compiled step ran the whole suite: every module is collected
            # (it imports with test-requires alone), and the tests of the compiled code (the
            # codec's and the records', which a wheel missing a file would fail) run against
            # the wheel. The protocol's tests (pure Python, 80 s) and the source tree's
            # checks (docs, house) ran in the compiled step on the same code; the wheel
            # builders run the command whole.
            runs = [command.replace(" -q ", " -q --collect-only "),
                    command.replace(" tests ", " tests/test_*.py tests/codec tests/packaging "
                                                  "tests/records ")]
        for run in runs:
            proc = subprocess.run(run, shell=True, cwd=str(tmp_path), env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert proc.returncode == 0, f"{run}\n{proc.stdout[-4000:]}"
            if "--collect-only" in run:
                assert re.search(r"^\d+(/\d+)? tests? collected", proc.stdout, re.M), proc.stdout[-4000:]
            elif "pytest" in run:
                assert re.search(r"^\d+ passed", proc.stdout, re.M), proc.stdout[-4000:]
