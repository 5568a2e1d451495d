"""``kcodec consume -f FMT``: kcat's format strings, byte for byte what kcat prints for the
same records (kcat itself is the reference where it is installed), and clear errors."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kcodec.client import Producer
from tests.cli.harness import run_bytes

FMT = "[%t] %p %o [%k] %K [%s] %S [%h] %T %R %% \\x41\\t|\\n"


@pytest.fixture(scope="module")
def records(kbroker) -> str:
    with Producer(bootstrap_servers=kbroker.bootstrap) as p:
        p.send("fmt", b"v1", key=b"k1", headers=[("a", b"1"), ("b", None)], timestamp=1700000000000)
        p.send("fmt", None, key=b"tomb", timestamp=1700000000001)
        p.send("fmt", b"no key \xff", timestamp=1700000000002)
        p.send("fmt", b"", key=b"", timestamp=1700000000003).result(10)
    return "fmt"


def _kcodec(kbroker, topic: str, fmt: str) -> tuple[int, bytes, str]:
    rc, out, err, _ = run_bytes("consume", "-b", kbroker.bootstrap, "-t", topic, "-o",
                                "beginning", "-e", "-q", "-f", fmt)
    return rc, out, err


def test_format_string_fields(kbroker, records) -> None:
    rc, out, err = _kcodec(kbroker, records, FMT)
    assert rc == 0, err
    lines = out.split(b"|\n")
    assert lines[0] == b"[fmt] 0 0 [k1] 2 [v1] 2 [a=1,b=NULL] 1700000000000 \0\0\0\x02 % A\t"
    assert lines[1] == b"[fmt] 0 1 [tomb] 4 [] -1 [] 1700000000001 \xff\xff\xff\xff % A\t"
    assert lines[2].startswith(b"[fmt] 0 2 [] -1 [no key \xff] 8 []")
    assert lines[3].startswith(b"[fmt] 0 3 [] 0 [] 0 []")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_format_string_as_kcat_prints_it(kbroker, records) -> None:
    rc, out, err = _kcodec(kbroker, records, FMT)
    assert rc == 0, err
    k = subprocess.run(["kcat", "-C", "-b", kbroker.bootstrap, "-t", records, "-o", "beginning",
                        "-e", "-q", "-f", FMT], capture_output=True, timeout=60)
    assert k.returncode == 0, k.stderr
    assert out == k.stdout


@pytest.mark.parametrize("argv,said", [
    (["-f", "%z"], "unknown token %z"),
    (["-f", "x\\q"], "unknown escape"),
    (["-f", ""], "-f must not be empty"),
    (["-f", "%s", "--json"], "-f and --format/--json: give one"),
    (["-f", "%s", "-K", ":"], "-K applies to --format raw"),
])
def test_format_string_errors(kbroker, argv, said) -> None:
    rc, out, err, _ = run_bytes("consume", "-b", kbroker.bootstrap, "-t", "fmt", *argv)
    assert (rc, out) == (2, b""), err
    assert said in err
