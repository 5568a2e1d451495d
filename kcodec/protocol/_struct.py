"""Message and struct classes built from the generated declarations, and their plans.

Every message class (``MetadataResponse``) and nested struct class
(``MetadataResponse.MetadataResponseBroker``) derives from :class:`Struct`. Attributes are
the snake_case field names; each defaults to its spec default, so objects build by keyword.
Objects compare equal when they have the same class and the same attribute values
(including tagged fields a newer peer sent that this version does not know, kept in
``_unknown_tags`` as ``{tag: raw bytes}``, else None, and written back on encode).

A request class derives from :class:`Request` (``FetchRequest(Request[FetchResponse])`` in
the type stub) and knows its API key and its response's class (``API_KEY``,
``RESPONSE``), so a round trip is typed from the request object alone: whoever sends
``req`` gets back a ``type(req).RESPONSE``. A response class derives from
:class:`Response`.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Generic, TypeVar

from kcodec.errors import UnsupportedVersionError
from kcodec.protocol import _plan as P
from kcodec.protocol._decl import Field, MessageDecl, in_range, parse_range

__all__ = ["Struct", "Message", "Request", "Response", "build_message", "ZERO_UUID",
           "UNKNOWN_TAGS"]

ZERO_UUID = uuid.UUID(int=0)

_INT_TYPES = ("int8", "int16", "int32", "int64", "uint16", "uint32")


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


class _FieldInfo:
    """A declaration with its ranges parsed and its default resolved."""

    __slots__ = ("decl", "name", "type", "elem", "is_array", "versions", "nullable", "tag",
                 "tagged", "flexible", "ignorable", "struct_cls", "default", "factory")

    def __init__(self, decl: Field) -> None:
        self.decl = decl
        self.name = decl.name
        self.type = decl.type
        self.is_array = decl.type.startswith("[]")
        self.elem = decl.type[2:] if self.is_array else decl.type
        self.versions = parse_range(decl.versions)
        self.nullable = parse_range(decl.nullable)
        self.tag = decl.tag
        self.tagged = parse_range(decl.tagged)
        self.flexible = parse_range(decl.flexible) if decl.flexible is not None else "inherit"
        self.ignorable = decl.ignorable
        self.struct_cls: type[Struct] | None = None
        self.default: Any = None
        self.factory: Any = None


def _resolve_default(fi: _FieldInfo) -> None:
    """Spec default if given, else the type's zero value; lists and structs get a factory."""
    decl = fi.decl
    if decl.has_default and decl.default is None:
        fi.default = None
        return
    if fi.is_array:
        fi.factory = list
        fi.default = []
        return
    t = fi.type
    if fi.struct_cls is not None:
        fi.factory = fi.struct_cls
        return
    if decl.has_default:
        fi.default = decl.default
        if t == "float64":
            fi.default = float(decl.default)
        return
    if t in _INT_TYPES:
        fi.default = 0
    elif t == "float64":
        fi.default = 0.0
    elif t == "bool":
        fi.default = False
    elif t == "uuid":
        fi.default = ZERO_UUID
    elif t == "string":
        fi.default = ""
    elif t == "bytes":
        fi.default = b""
    elif t == "records":
        # null where the newest version of the field may be null (Fetch); else empty: a
        # records field that was nullable only in a removed version (ShareFetch v0), or
        # never (FetchSnapshot), must still encode when left at its default
        top = fi.versions[1] if fi.versions is not None else None
        fi.default = None if top is not None and in_range(top, fi.nullable) else b""
    else:  # pragma: no cover - the generator only emits known types
        raise TypeError(f"unknown type {t}")


UNKNOWN_TAGS = "_unknown_tags"


class Struct:
    """Base class of every message and nested struct (keyword construction, equality).

    Instances have ``__slots__`` (one per field, plus ``_unknown_tags``): no per-object
    dict, so a decoded message costs fewer objects and less memory.
    """

    __slots__ = ()
    _info: ClassVar[tuple[_FieldInfo, ...]] = ()
    _names: ClassVar[frozenset[str]] = frozenset()
    _slots: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _fresh: ClassVar[tuple[tuple[str, Any], ...]] = ()
    _plans: ClassVar[dict[tuple[int, bool], P.StructPlan]]
    NAME: ClassVar[str] = ""

    def __init__(self, **fields: Any) -> None:
        cls = type(self)
        if "_defaults" in cls.__dict__ and "__init__" not in cls.__dict__:
            # a generated class's first object: it gets a constructor of its own (below)
            init = _constructor(cls)
            if init is not None:
                cls.__init__ = init  # type: ignore[method-assign]
                init(self, **fields)
                return
        _generic_init(self, fields)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k, _MISSING) for k in self._slots)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [f"{fi.name}={getattr(self, fi.name, _MISSING)!r}" for fi in self._info]
        unknown = getattr(self, UNKNOWN_TAGS, None)
        if unknown:
            parts.append(f"_unknown_tags={unknown!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._slots if hasattr(self, k)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def for_version(self, version: int) -> Any:
        """A copy holding only the fields ``version`` has (the others at their defaults,
        so it encodes at that version): fill every field you know, send at any version."""
        cls = type(self)
        kw = {}
        for fi in cls._info:
            if not in_range(version, fi.versions):
                continue
            v = getattr(self, fi.name)
            if fi.struct_cls is not None and v is not None:
                v = [x.for_version(version) for x in v] if fi.is_array else \
                    v.for_version(version)
            kw[fi.name] = v
        return cls(**kw)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Any:
        """The object ``to_dict`` gives back: nested dicts become their struct classes; a
        name the struct lacks is a ``TypeError``."""
        kw = dict(value)
        for fi in cls._info:
            v = kw.get(fi.name)
            sc = fi.struct_cls
            if sc is not None and v is not None:
                if fi.is_array:
                    kw[fi.name] = [sc.from_dict(x) if isinstance(x, dict) else x for x in v]
                elif isinstance(v, dict):
                    kw[fi.name] = sc.from_dict(v)
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists all the way down (structs become dicts)."""

        def conv(v: Any) -> Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {fi.name: conv(getattr(self, fi.name)) for fi in self._info}

    @classmethod
    def fields(cls) -> tuple[Field, ...]:
        """The declarations of this struct's fields (all versions)."""
        return tuple(fi.decl for fi in cls._info)

    @classmethod
    def plan_for(cls, version: int, flexible: bool) -> P.StructPlan:
        """The compiled plan of this struct at ``version`` inside a message that is (or is
        not) ``flexible`` there, compiled once; a message's ``plan`` and the plans of the
        structs that hold this one build on it."""
        key = (version, flexible)
        plan = cls._plans.get(key)
        if plan is None:
            plan = _compile(cls, version, flexible)
            cls._plans[key] = plan
        return plan


class Message(Struct):
    """A top-level request, response, header or data struct, all versions folded in."""

    __slots__ = ()

    API_KEY: ClassVar[int | None] = None
    KIND: ClassVar[str] = ""
    MIN_VERSION: ClassVar[int] = 0
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_VERSIONS: ClassVar[tuple[int, int] | None] = None
    LATEST_UNSTABLE: ClassVar[bool] = False
    # versions generated from an older copy of the specs (those Kafka 4.0 removed), or None
    LEGACY_VERSIONS: ClassVar[tuple[int, int] | None] = None
    STRUCTS: ClassVar[dict[str, type[Struct]]] = {}
    # (low, high, header version) from the spec's headerVersions map; empty where it has none
    HEADER_VERSIONS: ClassVar[tuple[tuple[int, int, int], ...]] = ()
    _vplans: ClassVar[dict[int, P.StructPlan]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        """True if ``version`` of this message is a flexible one (compact types, tagged fields)."""
        return in_range(version, cls.FLEXIBLE_VERSIONS)

    @classmethod
    def check_version(cls, version: int) -> None:
        """Raise ``UnsupportedVersionError`` unless ``version`` is one this message has."""
        if not isinstance(version, int) or not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise UnsupportedVersionError(
                f"{cls.NAME} version {version!r} is not supported "
                f"(valid versions {cls.MIN_VERSION}-{cls.MAX_VERSION})"
            )

    @classmethod
    def plan(cls, version: int) -> P.StructPlan:
        """The compiled plan of this message at ``version`` (cached)."""
        try:
            return cls._vplans[version]
        except (KeyError, TypeError):
            cls.check_version(version)
            plan = cls._vplans[version] = cls.plan_for(version, cls.is_flexible(version))
            return plan

    def encode(self, version: int) -> bytes:
        """The body of this message at ``version`` (no size prefix, no header)."""
        from kcodec.protocol.engine import encode_struct

        return encode_struct(self.plan(version), self)

    @classmethod
    def decode(cls, buf: Any, version: int) -> Any:
        """Decode a body at ``version``; trailing bytes are an error."""
        from kcodec.protocol.engine import decode_struct

        return decode_struct(cls.plan(version), buf, 0, True)[0]

    @classmethod
    def decode_from(cls, buf: Any, version: int, pos: int = 0) -> tuple[Any, int]:
        """Decode one instance at ``pos``: ``(object, next_pos)``; trailing bytes allowed."""
        from kcodec.protocol.engine import decode_struct

        return decode_struct(cls.plan(version), buf, pos, False)


class Response(Message):
    """A response message (the class of one API's responses, all versions folded in)."""

    __slots__ = ()


R = TypeVar("R", bound=Response)


class Request(Message, Generic[R]):
    """A request message; ``R`` (``RESPONSE`` at run time) is the class of its response."""

    __slots__ = ()

    API_KEY: ClassVar[int]
    RESPONSE: ClassVar[type[Response]]


def _op_code(fi: _FieldInfo, elem: str, flexible: bool) -> int:
    if elem in P.FIXED:
        return P.FIXED[elem]
    if elem == "string":
        return P.CSTRING if flexible else P.STRING
    if elem == "bytes":
        return P.CBYTES if flexible else P.BYTES
    if elem == "records":
        return P.CRECORDS if flexible else P.RECORDS
    return P.STRUCT


def _compile(cls: type[Struct], version: int, msg_flexible: bool) -> P.StructPlan:
    plan = P.StructPlan(cls, cls.NAME, version, msg_flexible)
    ops: list[tuple[Any, ...]] = []
    tagged: list[tuple[Any, ...]] = []
    absent: list[tuple[str, Any, bool, str]] = []
    defaults: dict[str, Any] = {}
    fresh: list[tuple[str, Any]] = []
    min_size = 1 if msg_flexible else 0
    for fi in cls._info:
        what = f"{cls.NAME}.{fi.name}"
        if not in_range(version, fi.versions):
            default = fi.factory() if fi.factory is not None else fi.default
            absent.append((fi.name, default, fi.ignorable, what))
            if fi.factory is not None:
                fresh.append((fi.name, fi.factory))
            else:
                defaults[fi.name] = fi.default
            continue
        flexible = msg_flexible if fi.flexible == "inherit" else \
            in_range(version, fi.flexible)  # type: ignore[arg-type]  # not "inherit" here
        is_tagged = fi.tag is not None and in_range(version, fi.tagged)
        if is_tagged:
            flexible = True
        nullable = in_range(version, fi.nullable)
        sub = None
        elem_code = 0
        if fi.struct_cls is not None:
            sub = fi.struct_cls.plan_for(version, msg_flexible)
        if fi.is_array:
            code = P.CARRAY if flexible else P.ARRAY
            elem_code = _op_code(fi, fi.elem, flexible)
        else:
            code = _op_code(fi, fi.elem, flexible)
        default = fi.factory() if fi.factory is not None else fi.default
        op = (code, fi.name, what, nullable, elem_code, sub, fi.tag if is_tagged else -1, default)
        if is_tagged:
            if not msg_flexible:
                raise TypeError(f"{what}: tagged in non-flexible version {version}")
            tagged.append(op)
            if fi.factory is not None:
                fresh.append((fi.name, fi.factory))
            else:
                defaults[fi.name] = fi.default
        else:
            ops.append(op)
            if code == P.STRUCT:
                min_size += 1 if nullable else sub.min_size  # type: ignore[union-attr]
            else:
                min_size += P.MIN_SIZE[code]
    tagged.sort(key=lambda op: op[6])
    plan.ops = tuple(ops)
    plan.tagged = tuple(tagged)
    plan.tag_map = {op[6]: op for op in tagged}
    plan.absent = tuple(absent)
    plan.defaults = defaults
    plan.fresh = tuple(fresh)
    plan.min_size = min_size
    return plan


_RESERVED = {n for c in (Message,) for k in c.__mro__ for n in vars(k)}


def _make_struct(name: str, decls: tuple[Field, ...], base: type) -> type[Struct]:
    names = tuple(d.name for d in decls)
    clash = set(names) & _RESERVED
    if clash:  # pragma: no cover - the generator rejects these names
        raise TypeError(f"{name}: field names {sorted(clash)} clash with Struct attributes")
    slots = names + (UNKNOWN_TAGS,)
    cls = type(name, (base,), {"NAME": name, "__module__": "kcodec.protocol", "__slots__": slots})
    cls._slots = slots  # type: ignore[attr-defined]
    cls._info = tuple(_FieldInfo(d) for d in decls)  # type: ignore[attr-defined]
    cls._names = frozenset(names)  # type: ignore[attr-defined]
    cls._plans = {}  # type: ignore[attr-defined]
    return cls  # type: ignore[return-value]


def _finish(cls: type[Struct], structs: dict[str, type[Struct]]) -> None:
    defaults: dict[str, Any] = {}
    fresh: list[tuple[str, Any]] = []
    for fi in cls._info:
        if fi.elem in structs:
            fi.struct_cls = structs[fi.elem]
        _resolve_default(fi)
        if fi.factory is not None:
            fresh.append((fi.name, fi.factory))
        else:
            defaults[fi.name] = fi.default
    cls._defaults = defaults
    cls._fresh = tuple(fresh)


def _generic_init(self: Struct, fields: dict[str, Any]) -> None:
    setter = object.__setattr__
    for key, value in self._defaults.items():
        setter(self, key, value)
    for key, factory in self._fresh:
        setter(self, key, factory())
    setter(self, UNKNOWN_TAGS, None)
    for key, value in fields.items():
        if key not in self._names:
            raise TypeError(f"{type(self).__name__} has no field {key!r}")
        setter(self, key, value)


class _NoArg:
    __slots__ = ()


_NO_ARG = _NoArg()


def _no_field(obj: Struct, extra: dict[str, Any]) -> None:
    raise TypeError(f"{type(obj).__name__} has no field {next(iter(extra))!r}")


def _constructor(cls: type[Struct]) -> Any:
    """``__init__`` for one generated class: its fields as keyword parameters with their
    defaults, each slot set once (the generic one sets every default, then every field
    given), a fresh list or struct made only for a field not given; the same objects
    result, about three times as fast. None when a field name cannot be a parameter."""
    import keyword

    names = list(cls._defaults) + [k for k, _ in cls._fresh]
    if any(not k.isidentifier() or keyword.iskeyword(k) or k.startswith("_") or k == "self"
           for k in names):
        return None
    ns: dict[str, Any] = {"_NO_ARG": _NO_ARG, "_no_field": _no_field}
    params, body = [], []
    for i, (k, v) in enumerate(cls._defaults.items()):
        ns[f"_d{i}"] = v
        params.append(f"{k}=_d{i}")
        body.append(f"    self.{k} = {k}")
    for i, (k, factory) in enumerate(cls._fresh):
        ns[f"_f{i}"] = factory
        params.append(f"{k}=_NO_ARG")
        body.append(f"    self.{k} = _f{i}() if {k} is _NO_ARG else {k}")
    body.append(f"    self.{UNKNOWN_TAGS} = None")
    head = ", ".join(["self", "*", *params, "**_extra"]) if params else "self, **_extra"
    src = (f"def __init__({head}):\n    if _extra:\n        _no_field(self, _extra)\n"
           + "\n".join(body) + "\n")
    exec(compile(src, f"<kcodec.protocol {cls.__qualname__}.__init__>", "exec"), ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _message_doc(decl: MessageDecl, valid: tuple[int, int]) -> str:
    """The docstring of a generated message class, from its declaration."""
    what = {"request": "The request", "response": "The response",
            "header": "The header"}.get(decl.kind, "The message")
    key = f" of API key {decl.api_key}" if decl.api_key is not None else ""
    fields = ", ".join(f.name for f in decl.fields) or "none"
    return (f"{what} {decl.name}{key}, versions {valid[0]}-{valid[1]}, all folded into "
            f"this one class (generated from Kafka's message specs). Fields: {fields}.")


def build_message(decl: MessageDecl) -> type[Message]:
    """The class of one declaration, with its nested struct classes as attributes."""
    base = {"request": Request, "response": Response}.get(decl.kind, Message)
    cls: Any = _make_struct(decl.name, decl.fields, base)
    valid = parse_range(decl.valid)
    assert valid is not None
    cls.API_KEY = decl.api_key
    cls.KIND = decl.kind
    cls.MIN_VERSION, cls.MAX_VERSION = valid
    cls.FLEXIBLE_VERSIONS = parse_range(decl.flexible)
    cls.LATEST_UNSTABLE = decl.latest_unstable
    cls.LEGACY_VERSIONS = parse_range(decl.legacy)
    spans = []
    for rng, hv in (decl.headers or {}).items():
        span = parse_range(rng)
        if span is not None:
            spans.append((span[0], span[1], hv))
    cls.HEADER_VERSIONS = tuple(sorted(spans))
    cls.__doc__ = _message_doc(decl, valid)
    structs: dict[str, type[Struct]] = {}
    for sname, sfields in decl.structs.items():
        structs[sname] = _make_struct(sname, sfields, Struct)
    for scls in structs.values():
        _finish(scls, structs)
        scls.__qualname__ = f"{decl.name}.{scls.NAME}"
        setattr(cls, scls.NAME, scls)
    _finish(cls, structs)
    cls.STRUCTS = structs
    cls._vplans = {}
    return cls  # type: ignore[no-any-return]
