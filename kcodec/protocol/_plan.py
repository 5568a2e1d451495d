"""Encode/decode plans: one per (struct class, version), every choice already resolved.

A plan is what both interpreters (``kcodec._py.engine`` and ``kcodec._cy.engine``) run.
For one struct at one version it lists, in wire order, an *op* per field present in that
version, with the wire form fixed (int16- or varint-prefixed string, nullable or not, ...):

    op = (code, key, what, nullable, elem, sub, tag, default)

    code      one of the wire codes below (the field's own encoding)
    key       attribute name (snake_case)
    what      "StructName.key", used in error messages
    nullable  True if null may appear in this version
    elem      for ARRAY/CARRAY: the element code (a primitive, or STRUCT)
    sub       for STRUCT (or an array of structs): the element's StructPlan
    tag       KIP-482 tag of a tagged field, else -1
    default   the field's default (tagged fields are written only when different)

Wire codes::

    INT8 INT16 INT32 INT64 UINT16 UINT32 FLOAT64 BOOL  big-endian fixed width
    UUID        16 bytes
    UVARINT     unsigned varint (at most 5 bytes)
    STRING      int16 length (-1 = null) + UTF-8          CSTRING  uvarint(length+1), 0 = null
    BYTES       int32 length (-1 = null) + bytes          CBYTES   uvarint(length+1), 0 = null
    RECORDS     as BYTES, decoded without a copy          CRECORDS as CBYTES, the same
    ARRAY       int32 count (-1 = null) + elements        CARRAY   uvarint(count+1), 0 = null
    STRUCT      fields, then (flexible) the tagged fields; a nullable struct is preceded by
                int8 -1 (null) or 1 (present)
    tagged fields := uvarint(count) { uvarint(tag) uvarint(size) value }    (in tag order)

The codes are plain ints so the compiled twin can switch on them; it keeps a C-friendly copy
of each plan in ``plan.cy`` (built on first use from these same tuples).

Records fields (RECORDS/CRECORDS) stay opaque: decoding a read-only input (``bytes``, a
read-only memoryview) gives a read-only ``memoryview`` slice of it, without copying the
(often large) record batches; a writable input gives a ``bytes`` copy, so later writes to
the caller's buffer cannot change the decoded message.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "FLOAT64", "BOOL", "UUID",
    "UVARINT", "STRING", "CSTRING", "BYTES", "CBYTES", "ARRAY", "CARRAY", "STRUCT",
    "RECORDS", "CRECORDS", "CODES", "MIN_SIZE", "StructPlan",
]

INT8, INT16, INT32, INT64, UINT16, UINT32, FLOAT64, BOOL, UUID, UVARINT = range(1, 11)
STRING, CSTRING, BYTES, CBYTES, ARRAY, CARRAY, STRUCT, RECORDS, CRECORDS = range(11, 20)

CODES = {
    "INT8": INT8, "INT16": INT16, "INT32": INT32, "INT64": INT64, "UINT16": UINT16,
    "UINT32": UINT32, "FLOAT64": FLOAT64, "BOOL": BOOL, "UUID": UUID, "UVARINT": UVARINT,
    "STRING": STRING, "CSTRING": CSTRING, "BYTES": BYTES, "CBYTES": CBYTES,
    "ARRAY": ARRAY, "CARRAY": CARRAY, "STRUCT": STRUCT, "RECORDS": RECORDS, "CRECORDS": CRECORDS,
}

# The fewest bytes a value of each code occupies (a null string still has its length).
MIN_SIZE = {
    INT8: 1, INT16: 2, INT32: 4, INT64: 8, UINT16: 2, UINT32: 4, FLOAT64: 8, BOOL: 1,
    UUID: 16, UVARINT: 1, STRING: 2, CSTRING: 1, BYTES: 4, CBYTES: 1, ARRAY: 4, CARRAY: 1,
    RECORDS: 4, CRECORDS: 1,
}

FIXED = {
    "int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64, "uint16": UINT16,
    "uint32": UINT32, "float64": FLOAT64, "bool": BOOL, "uuid": UUID,
}


class StructPlan:
    """The resolved layout of one struct class at one version (see the module docstring).

    ``absent`` lists ``(key, default, ignorable, what)`` for fields the version lacks: the
    encoder refuses non-default values in non-ignorable ones. ``defaults`` seeds a decoded
    object with immutable defaults of fields not read from the wire (absent or tagged);
    ``fresh`` names ``(key, factory)`` for mutable ones (lists, structs).
    """

    __slots__ = (
        "cls", "name", "version", "flexible", "ops", "tagged", "tag_map", "absent",
        "defaults", "fresh", "min_size", "cy",
    )

    def __init__(self, cls: type, name: str, version: int, flexible: bool) -> None:
        self.cls = cls
        self.name = name
        self.version = version
        self.flexible = flexible
        self.ops: tuple[tuple[Any, ...], ...] = ()
        self.tagged: tuple[tuple[Any, ...], ...] = ()
        self.tag_map: dict[int, tuple[Any, ...]] = {}
        self.absent: tuple[tuple[str, Any, bool, str], ...] = ()
        self.defaults: dict[str, Any] = {}
        self.fresh: tuple[tuple[str, Any], ...] = ()
        self.min_size = 0
        self.cy: object | None = None  # the compiled twin's lowered copy

    def __repr__(self) -> str:
        return f"<StructPlan {self.name} v{self.version}{' flexible' if self.flexible else ''}>"
