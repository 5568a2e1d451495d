"""The versions Kafka 4.0 removed (KIP-896), folded in from an older copy of the specs.

The generator merges an older spec into the reference one below the reference's lowest
valid version (``tools/gen_protocol/specmerge.py``). These tests run the merge on small
hand-written specs, run the generator with ``--legacy-specs`` on a directory of them, and
check what the committed classes now declare. The bytes of the old versions are checked
against kafka-python's classes in tests/protocol/test_protocol_interop.py (which runs every version
both libraries know, v0 included).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kcodec.protocol import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    ProduceRequest,
    ProduceResponse,
)
from tests.support import REPO
from tools.gen_protocol.specmerge import merge_spec

ROOT = REPO


def spec(valid: str, fields: list[dict], **kw: object) -> dict:
    return {"apiKey": 99, "type": "request", "name": "TestRequest", "validVersions": valid,
            "flexibleVersions": kw.pop("flexible", "none"), "fields": fields, **kw}


def f(name: str, type_: str, versions: str, **kw: object) -> dict:
    return {"name": name, "type": type_, "versions": versions, **kw}


def test_merge_adds_old_versions_and_keeps_removed_fields() -> None:
    ref = spec("3-5", [f("Acks", "int16", "0+"), f("Topics", "[]Topic", "0+", fields=[
        f("Name", "string", "0-4"), f("TopicId", "uuid", "5+")])])
    old = spec("0-4", [f("Acks", "int16", "0+"), f("Gone", "int32", "1-2", default="-1"),
                       f("Topics", "[]Topic", "0+", fields=[f("Name", "string", "0+")])])
    m = merge_spec(ref, old, "Old Kafka")
    assert m["validVersions"] == "0-5" and m["_legacy"] == ("0-2", "Old Kafka")
    assert [x["name"] for x in m["fields"]] == ["Acks", "Gone", "Topics"]
    assert m["fields"][1]["versions"] == "1-2"
    assert [(x["name"], x["versions"]) for x in m["fields"][2]["fields"]] == [
        ("Name", "0-4"), ("TopicId", "5+")]
    # nothing to add: the reference itself
    assert merge_spec(ref, spec("3-4", ref["fields"]), "x") is ref


@pytest.mark.parametrize("old_fields, message", [
    ([f("Acks", "int32", "0+")], "type int32 in the older specs"),
    ([f("Renamed", "int16", "0+")], "Acks: in the reference below v3 but not in the older specs"),
    ([f("Acks", "int16", "0")], "leave a gap"),
    ([f("Acks", "int16", "0+", default="1")], "default"),
])
def test_merge_refuses_what_does_not_line_up(old_fields: list[dict], message: str) -> None:
    ref = spec("3-5", [f("Acks", "int16", "3+")] if "gap" in message else [f("Acks", "int16", "0+")])
    with pytest.raises(ValueError, match=message):
        merge_spec(ref, spec("0-4", old_fields), "x")


def test_merge_refuses_flexible_old_versions() -> None:
    with pytest.raises(ValueError, match="flexible"):
        merge_spec(spec("3-5", [], flexible="2+"), spec("0-4", [], flexible="2+"), "x")


def _gen(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.gen_protocol", "--out", str(tmp / "out"),
                           "--stub", str(tmp / "stub.pyi"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_generator_records_the_old_copy_and_checks_without_it(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    ref = spec("3-5", [f("Acks", "int16", "0+")])
    old = spec("0-4", [f("Acks", "int16", "0+"), f("Gone", "int32", "0-1")])
    (tmp_path / "new/TestRequest.json").write_text(json.dumps(ref))
    (tmp_path / "old/TestRequest.json").write_text("// a comment\n" + json.dumps(old))
    r = _gen(tmp_path, "--specs", str(tmp_path / "new"), "--legacy-specs", str(tmp_path / "old"),
             "--legacy-source", "Kafka 3.test")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "out/test.py").read_text()
    assert "valid='0-5'" in text and "legacy='0-2', legacy_source='Kafka 3.test'" in text
    assert "F('gone', 'int32', '0-1')" in text
    # the reference copy alone: the old versions are kept as committed, the rest checked
    r = _gen(tmp_path, "--specs", str(tmp_path / "new"), "--check")
    assert r.returncode == 0, r.stderr
    assert "versions 0-2 of TestRequest kept as committed" in r.stderr
    # a change in the reference is still drift
    (tmp_path / "new/TestRequest.json").write_text(json.dumps(spec("3-6", ref["fields"])))
    r = _gen(tmp_path, "--specs", str(tmp_path / "new"), "--check")
    assert r.returncode == 1 and "test.py differs" in r.stderr
    # an older copy that disagrees with the reference is refused, naming the field
    (tmp_path / "old/TestRequest.json").write_text(json.dumps(spec("0-4", [f("Acks", "int8", "0+")])))
    r = _gen(tmp_path, "--specs", str(tmp_path / "new"), "--legacy-specs", str(tmp_path / "old"))
    assert r.returncode == 1 and "TestRequest.Acks: type int8" in r.stderr


def test_committed_classes_cover_the_removed_versions() -> None:
    assert (ProduceRequest.MIN_VERSION, ProduceResponse.MIN_VERSION) == (0, 0)
    assert ProduceRequest.LEGACY_VERSIONS == (0, 2)
    assert FetchRequest.MIN_VERSION == 0 and FetchRequest.LEGACY_VERSIONS == (0, 3)
    assert ListOffsetsRequest.MIN_VERSION == 0 and OffsetCommitRequest.MIN_VERSION == 0
    # Produce v0: no transactional id; the topic name is still there
    req = ProduceRequest(acks=1, timeout_ms=100, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"x")])])
    body = req.encode(0)
    assert body == (b"\x00\x01" b"\x00\x00\x00\x64" b"\x00\x00\x00\x01" b"\x00\x01t"
                    b"\x00\x00\x00\x01" b"\x00\x00\x00\x00" b"\x00\x00\x00\x01x")
    assert ProduceRequest.decode(body, 0) == req
