"""kafka-python 3.x's protocol classes as an independent peer (test-only).

``PEER[name]`` is kafka-python's class for a spec name; ``to_peer``/``from_peer`` convert
objects field by field (the attribute names are the same snake_case names).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import kafka.protocol as _kp
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage


def _load() -> dict[str, Any]:
    for m in pkgutil.walk_packages(_kp.__path__, "kafka.protocol."):
        if ".old" in m.name or m.name.endswith(("generate_stubs",)):
            continue
        try:
            importlib.import_module(m.name)
        except Exception:  # pragma: no cover - optional kafka-python modules
            pass

    def subs(c: type) -> Any:
        for s in c.__subclasses__():
            yield s
            yield from subs(s)

    found: dict[str, Any] = {}
    for c in list(subs(ApiMessage)) + list(subs(ApiData)):
        if getattr(c, "_class_version", None) is None and getattr(c, "_json", None):
            found.setdefault(c.name, c)
    return found


PEER = _load()

# kafka-python renames a few fields of the specs (struct, its name) -> kcodec's name
ALIASES = {
    ("MetadataResponse", "authorized_operations"): "cluster_authorized_operations",
    ("MetadataResponseTopic", "authorized_operations"): "topic_authorized_operations",
    ("DescribeClusterResponse", "authorized_operations"): "cluster_authorized_operations",
}


def _ours(cls: Any, peer_name: str) -> str:
    return ALIASES.get((cls.NAME, peer_name), peer_name)


def peer_max_version(name: str) -> int:
    return PEER[name].max_version


def _is_bitfield(f: Any) -> bool:
    return getattr(getattr(f, "_type", None), "__name__", "") == "BitField"


def _to_bits(v: int) -> Any:
    if v == -(1 << 31):
        return None
    u = v & 0xFFFFFFFF
    return {i for i in range(32) if u >> i & 1}


def _from_bits(v: Any) -> int:
    if v is None:
        return -(1 << 31)
    u = sum(1 << i for i in v)
    return u - (1 << 32) if u >= 1 << 31 else u


def to_peer(peer_cls: Any, obj: Any, version: Any = None) -> Any:
    kw = {}
    for name, f in peer_cls.fields.items():
        v = getattr(obj, _ours(type(obj), name))
        if _is_bitfield(f):
            v = _to_bits(v)
        if f.is_struct():
            v = None if v is None else to_peer(f.data_class, v)
        elif f.is_struct_array():
            v = None if v is None else [to_peer(f.data_class, x) for x in v]
        kw[name] = v
    if version is not None:
        kw["version"] = version
    return peer_cls(**kw)


def from_peer(cls: Any, peer_obj: Any, version: int) -> Any:
    """The kcodec object with the peer's values (fields kcodec knows only) at ``version``."""
    from kcodec.protocol._decl import in_range

    back = {ours: theirs for (struct, theirs), ours in ALIASES.items() if struct == cls.NAME}
    kw = {}
    for fi in cls._info:
        pname = back.get(fi.name, fi.name)
        v = getattr(peer_obj, pname)
        if _is_bitfield(type(peer_obj).fields[pname]):
            v = _from_bits(v)
        if v is None and fi.factory is not None and not (
                in_range(version, fi.versions) and in_range(version, fi.nullable)):
            v = fi.factory()  # kafka-python leaves absent lists/structs None
        elif fi.struct_cls is not None:
            if fi.is_array:
                v = None if v is None else [from_peer(fi.struct_cls, x, version) for x in v]
            else:
                v = None if v is None else from_peer(fi.struct_cls, v, version)
        elif isinstance(v, (bytearray, memoryview)):
            v = bytes(v)
        elif v is None and fi.type == "uuid" and fi.default is not None:
            v = fi.default  # kafka-python leaves uuids of absent fields None; Kafka uses zero
        kw[fi.name] = v
    return cls(**kw)


def field_names_match(cls: Any, peer_cls: Any) -> list[str]:
    """Differences between the attribute names of a kcodec struct and the peer's."""
    ours = {fi.name for fi in cls._info}
    theirs = {_ours(cls, n) for n in peer_cls.fields}
    diff = [f"{cls.NAME}: only kcodec has {n}" for n in sorted(ours - theirs)]
    diff += [f"{cls.NAME}: only kafka-python has {n}" for n in sorted(theirs - ours)]
    for fi in cls._info:
        back = {o: t for (st, t), o in ALIASES.items() if st == cls.NAME}
        f = peer_cls.fields.get(back.get(fi.name, fi.name))
        if fi.struct_cls is not None and f is not None:
            diff += field_names_match(fi.struct_cls, f.data_class)
    return diff
