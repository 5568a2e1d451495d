"""The client's bridge to the protocol: encode requests, decode responses, by API key.

It interprets the generated declarations of ``kcodec.protocol.messages`` (names, types,
version ranges, tags) directly: a small pure-Python walker that is all the client needs
(requests are small; record data stays opaque bytes). Decoded structs are ``Struct``
objects with the spec's snake_case attributes; requests may be given as dicts or objects,
missing fields taking their declared defaults.

Wire layout (KIP-482 for flexible versions)::

    Request  => RequestHeader Body        Response => ResponseHeader Body
    RequestHeader v1 => api_key:int16 api_version:int16 correlation_id:int32 client_id:nullable_string
    RequestHeader v2 => v1 TAG_BUFFER     ResponseHeader v0 => correlation_id:int32   v1 => v0 TAG_BUFFER
    (ApiVersions responses always use ResponseHeader v0.)
"""

from __future__ import annotations

import functools
import importlib
import struct
import uuid as _uuid
from typing import Any, Optional

from kcodec.errors import ProtocolError, UnsupportedVersionError
from kcodec.protocol._decl import Field, MessageDecl, in_range
from kcodec.protocol._decl import parse_range as _parse_range
from kcodec.protocol.messages import MODULES

__all__ = ["Struct", "API", "encode_request", "decode_response", "decode_struct",
           "encode_struct", "request_header_version", "response_header_version", "API_KEYS"]


parse_range = functools.lru_cache(maxsize=None)(_parse_range)


class Struct:
    """A decoded struct: attributes named as the spec's fields."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"Struct({inner})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Struct) and other.__dict__ == self.__dict__


def _load() -> tuple[dict[int, tuple[MessageDecl, MessageDecl]], dict[str, MessageDecl]]:
    apis: dict[int, list] = {}
    named: dict[str, MessageDecl] = {}
    for mod in MODULES:
        for d in importlib.import_module(f"kcodec.protocol.messages.{mod}").DECLS:
            named[d.name] = d
            if d.api_key is not None:
                apis.setdefault(d.api_key, [None, None])[0 if d.kind == "request" else 1] = d
    return {k: (v[0], v[1]) for k, v in apis.items() if v[0] and v[1]}, named


API, DECLS = _load()
API_KEYS = {d[0].name[: -len("Request")]: k for k, d in API.items()}


def request_header_version(api_key: int, version: int) -> int:
    return 2 if in_range(version, parse_range(API[api_key][0].flexible)) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == 18:
        return 0
    return 1 if in_range(version, parse_range(API[api_key][1].flexible)) else 0


# ------------------------------------------------------------------------------------ encoding

_FIXED = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H",
          "uint32": ">I", "float64": ">d", "bool": ">?"}
_ZERO = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "uint32": 0,
         "float64": 0.0, "bool": False, "string": "", "bytes": b"", "records": None,
         "uuid": _uuid.UUID(int=0)}


def _uvar(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _default(f: Field, structs: dict) -> Any:
    if f.has_default and not f.type.startswith("["):
        return f.default
    if f.type.startswith("[]"):
        return []
    if f.type in _ZERO:
        return _ZERO[f.type]
    return None if f.type not in structs else _defaults_struct(structs[f.type], structs)


def _defaults_struct(fields, structs) -> Struct:
    return Struct(**{f.name: _default(f, structs) for f in fields})


def _get(obj: Any, name: str, f: Field, structs: dict) -> Any:
    if isinstance(obj, dict):
        return obj[name] if name in obj else _default(f, structs)
    return getattr(obj, name, _default(f, structs)) if obj is not None else _default(f, structs)


class _Enc:
    def __init__(self, structs: dict, version: int, flexible: bool) -> None:
        self.structs, self.v, self.flex = structs, version, flexible
        self.out: list[bytes] = []

    def fields(self, fields, obj) -> None:
        v = self.v
        tagged = []
        for f in fields:
            if not in_range(v, parse_range(f.versions)):
                continue
            val = _get(obj, f.name, f, self.structs)
            if self.flex and f.tagged and in_range(v, parse_range(f.tagged)):
                if val != _default(f, self.structs) and val is not None:
                    sub = _Enc(self.structs, v, self.flex)
                    sub.value(f, val)
                    tagged.append((f.tag, b"".join(sub.out)))
                continue
            self.value(f, val)
        if self.flex:
            self.out.append(_uvar(len(tagged)))
            for tag, data in sorted(tagged):
                self.out += [_uvar(tag), _uvar(len(data)), data]

    def nullable(self, f: Field) -> bool:
        return in_range(self.v, parse_range(f.nullable))

    def value(self, f: Field, val: Any, typ: Optional[str] = None) -> None:
        t = typ or f.type
        o = self.out
        if t in _FIXED:
            try:
                o.append(struct.pack(_FIXED[t], val))
            except struct.error as exc:
                from kcodec.errors import EncodeError
                raise EncodeError(f"{f.name}: {exc}") from None
        elif t == "uuid":
            o.append(val.bytes if isinstance(val, _uuid.UUID) else bytes(val))
        elif t in ("string", "bytes", "records"):
            if val is None:
                o.append(b"\x00" if self.flex else (b"\xff\xff" if t == "string" else b"\xff\xff\xff\xff"))
                return
            b = val.encode() if t == "string" else bytes(val)
            if self.flex:
                o += [_uvar(len(b) + 1), b]
            else:
                o += [struct.pack(">h" if t == "string" else ">i", len(b)), b]
        elif t.startswith("[]"):
            if val is None:
                o.append(b"\x00" if self.flex else b"\xff\xff\xff\xff")
                return
            val = list(val)
            o.append(_uvar(len(val) + 1) if self.flex else struct.pack(">i", len(val)))
            for item in val:
                self.value(f, item, t[2:])
        elif t in self.structs:
            self.fields(self.structs[t], val)
        else:
            raise UnsupportedVersionError(f"unknown type {t!r} for field {f.name}")


def encode_struct(decl: MessageDecl, version: int, obj: Any) -> bytes:
    flexible = in_range(version, parse_range(decl.flexible))
    e = _Enc(decl.structs, version, flexible)
    e.fields(decl.fields, obj)
    return b"".join(e.out)


def encode_request(api_key: int, version: int, correlation_id: int, client_id: Optional[str],
                   body: Any) -> bytes:
    """A whole request frame: int32 size, header, body."""
    req = API[api_key][0]
    if not in_range(version, parse_range(req.valid)):
        raise UnsupportedVersionError(f"{req.name} version {version} is not supported")
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    head = struct.pack(">hhi", api_key, version, correlation_id) + cid
    if request_header_version(api_key, version) == 2:
        head += b"\x00"
    payload = head + encode_struct(req, version, body)
    return struct.pack(">i", len(payload)) + payload


# ------------------------------------------------------------------------------------ decoding

class _Dec:
    __slots__ = ("b", "p", "n", "structs", "v", "flex")

    def __init__(self, data, structs: dict, version: int, flexible: bool) -> None:
        self.b = memoryview(data)
        self.p = 0
        self.n = len(data)
        self.structs, self.v, self.flex = structs, version, flexible

    def take(self, k: int, what: str):
        if k < 0 or self.p + k > self.n:
            raise ProtocolError(f"truncated response: {what} needs {k} bytes at offset {self.p}, "
                                f"{self.n - self.p} available")
        s = self.b[self.p:self.p + k]
        self.p += k
        return s

    def uvar(self, what: str) -> int:
        shift = res = 0
        for _ in range(5):
            c = self.take(1, what)[0]
            res |= (c & 0x7F) << shift
            if not c & 0x80:
                return res
            shift += 7
        raise ProtocolError(f"varint too long in {what} at offset {self.p}")

    def length(self, fixed_fmt: str, size: int, what: str, minimum: int = 1) -> int:
        if self.flex:
            n = self.uvar(what) - 1
        else:
            n = struct.unpack(fixed_fmt, self.take(size, what))[0]
        if n >= 0 and n * minimum > self.n - self.p:
            raise ProtocolError(f"impossible length {n} for {what} at offset {self.p}")
        return n

    def fields(self, fields) -> Struct:
        v = self.v
        obj = Struct()
        d = obj.__dict__
        tagged = {}
        for f in fields:
            if not in_range(v, parse_range(f.versions)):
                d[f.name] = _default(f, self.structs)
                continue
            if self.flex and f.tagged and in_range(v, parse_range(f.tagged)):
                tagged[f.tag] = f
                d[f.name] = _default(f, self.structs)
                continue
            d[f.name] = self.value(f, f.type)
        if self.flex:
            for _ in range(self.uvar("tagged fields")):
                tag = self.uvar("tag")
                size = self.uvar("tag size")
                end = self.p + size
                f = tagged.get(tag)
                if f is None:
                    self.take(size, "unknown tagged field")
                    continue
                d[f.name] = self.value(f, f.type)
                if self.p != end:
                    raise ProtocolError(f"tagged field {f.name} has a wrong size")
        return obj

    def value(self, f: Field, t: str) -> Any:
        if t in _FIXED:
            fmt = _FIXED[t]
            size = struct.calcsize(fmt)
            return struct.unpack(fmt, self.take(size, f.name))[0]
        if t == "uuid":
            return _uuid.UUID(bytes=bytes(self.take(16, f.name)))
        if t in ("string", "bytes", "records"):
            n = self.length(">h" if t == "string" else ">i", 2 if t == "string" else 4, f.name, 1)
            if n < 0:
                return None
            raw = self.take(n, f.name)
            if t == "string":
                try:
                    return str(raw, "utf-8")
                except UnicodeDecodeError:
                    raise ProtocolError(f"invalid UTF-8 in {f.name}") from None
            return bytes(raw)
        if t.startswith("[]"):
            n = self.length(">i", 4, f.name, 1)
            if n < 0:
                return None
            et = t[2:]
            return [self.value(f, et) for _ in range(n)]
        if t in self.structs:
            return self.fields(self.structs[t])
        raise ProtocolError(f"unknown type {t!r} for {f.name}")


def decode_struct(decl: MessageDecl, version: int, data, offset: int = 0) -> tuple[Struct, int]:
    flexible = in_range(version, parse_range(decl.flexible))
    d = _Dec(data, decl.structs, version, flexible)
    d.p = offset
    obj = d.fields(decl.fields)
    return obj, d.p


def decode_response(api_key: int, version: int, payload) -> tuple[int, Struct]:
    """(correlation_id, body) of one response frame's payload (size prefix removed)."""
    if len(payload) < 4:
        raise ProtocolError(f"response of {len(payload)} bytes has no header")
    cid = struct.unpack_from(">i", payload, 0)[0]
    off = 4
    if response_header_version(api_key, version) == 1:
        d = _Dec(payload, {}, version, True)
        d.p = 4
        for _ in range(d.uvar("header tags")):
            d.uvar("tag")
            d.take(d.uvar("tag size"), "header tag")
        off = d.p
    body, end = decode_struct(API[api_key][1], version, payload, off)
    if end != len(payload):
        raise ProtocolError(f"{len(payload) - end} unexpected bytes after the {API[api_key][1].name}")
    return cid, body
