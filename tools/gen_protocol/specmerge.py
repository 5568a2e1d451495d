"""Fold the versions an older copy of Kafka's specs still had into a newer spec.

Kafka 4.0 removed old versions of many APIs from its specs (KIP-896: Produce v0-2, Fetch
v0-3, ListOffsets v0, OffsetCommit v0-1, ...). kcodec speaks every version, so the generator
takes the newer (reference) spec for the versions it declares and an older copy (Kafka 3.x)
for the versions below the reference's lowest one. The merge is field by field, matched on
the snake_case name:

* a field in both: the older copy decides its presence and nullability below the cut (the
  reference's lowest valid version), the reference at and above it; the two ranges must join
  without a gap, and the type and default must agree;
* a field only in the older copy (removed in 4.0): kept with its ranges cut below the cut,
  placed after the same neighbour as in the older copy;
* a field only in the reference that reaches below the cut: an error (a rename to map).

Anything that does not line up raises ``ValueError`` naming the field path, so a new spec
copy cannot silently change an old version. :func:`spec_from_decl` turns a committed
declaration back into spec form, so a merged module can be re-checked against a newer
reference without the old copy at hand (its old versions are then kept as committed).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from kcodec.protocol._decl import MAX_VERSION, parse_range

__all__ = ["merge_spec", "spec_from_decl", "fmt_range"]

Range = tuple[int, int] | None

PRIMITIVES = {
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid",
    "string", "bytes", "records",
}


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", s).lower()


def fmt_range(r: Range) -> str:
    if r is None:
        return "none"
    lo, hi = r
    if hi == MAX_VERSION:
        return f"{lo}+"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _clip(r: Range, hi: int) -> Range:
    """``r`` cut to versions ``<= hi``."""
    if r is None or r[0] > hi:
        return None
    return (r[0], min(r[1], hi))


def _join(low: Range, high: Range, cut: int, path: str, what: str) -> Range:
    """``low`` (versions below ``cut``, from the older copy) joined to ``high`` (the
    reference's range, whose part below ``cut`` must equal ``low``)."""
    below = _clip(high, cut - 1)
    if below is not None and below != low:
        raise ValueError(f"{path}: {what} {fmt_range(high)} in the reference disagrees with "
                         f"{fmt_range(low)} in the older specs below v{cut}")
    if low is None:
        return high
    if high is None:
        return low
    if high[0] > low[1] + 1:
        raise ValueError(f"{path}: {what} {fmt_range(low)} and {fmt_range(high)} leave a gap")
    return (min(low[0], high[0]), high[1])


def _text(orig: str | None, merged: Range) -> str | None:
    """Keep the reference's own notation when the merge did not change the range."""
    if orig is not None and parse_range(orig) == merged:
        return orig
    return None if merged is None else fmt_range(merged)


class _Merger:
    def __init__(self, ref: dict[str, Any], old: dict[str, Any], cut: int) -> None:
        self.cut = cut
        self.ref_common = {c["name"]: c["fields"] for c in ref.get("commonStructs", [])}
        self.old_common = {c["name"]: c["fields"] for c in old.get("commonStructs", [])}
        self.common: dict[str, list[dict[str, Any]]] = {}

    def _old_struct(self, f: dict[str, Any] | None) -> list[dict[str, Any]]:
        if f is None:
            return []
        if "fields" in f:
            return list(f["fields"])
        elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        return list(self.old_common.get(elem, [])) if elem not in PRIMITIVES else []

    def fields(self, ref: list[dict[str, Any]], old: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
        cut = self.cut
        ref_names = {_snake(f["name"]) for f in ref}
        old_by = {_snake(f["name"]): f for f in old}
        # old-only fields that exist below the cut, anchored after their old neighbour
        after: dict[str | None, list[dict[str, Any]]] = {}
        anchor: str | None = None
        for f in old:
            key = _snake(f["name"])
            if key in ref_names:
                anchor = key
            elif _clip(parse_range(f["versions"]), cut - 1) is not None:
                after.setdefault(anchor, []).append(self._old_only(f, f"{path}.{f['name']}"))
        out = list(after.get(None, []))
        for f in ref:
            key = _snake(f["name"])
            out.append(self._both(f, old_by.get(key), f"{path}.{f['name']}"))
            out += after.get(key, [])
        return out

    def _both(self, f: dict[str, Any], o: dict[str, Any] | None, path: str) -> dict[str, Any]:
        cut = self.cut
        r = parse_range(f["versions"])
        low = _clip(parse_range(o["versions"]), cut - 1) if o is not None else None
        if low is None and _clip(r, cut - 1) is not None:
            if o is None:
                raise ValueError(f"{path}: in the reference below v{cut} but not in the older specs")
        if low is not None and o is not None and o["type"] != f["type"]:
            raise ValueError(f"{path}: type {o['type']} in the older specs, {f['type']} in the reference")
        m = dict(f)
        m["versions"] = _text(f["versions"], _join(low, r, cut, path, "versions"))
        if low is not None and o is not None:
            n_low = _clip(parse_range(o.get("nullableVersions")), cut - 1)
            n = _join(n_low, parse_range(f.get("nullableVersions")), cut, path, "nullableVersions")
            if n is not None:
                m["nullableVersions"] = _text(f.get("nullableVersions"), n)
            t_low = _clip(parse_range(o.get("taggedVersions")), cut - 1) if "tag" in o else None
            if t_low is not None:
                raise ValueError(f"{path}: tagged below v{cut} in the older specs")
            if ("default" in o) != ("default" in f) or (
                    "default" in o and _norm(o["default"]) != _norm(f["default"])):
                raise ValueError(f"{path}: default {o.get('default')!r} in the older specs, "
                                 f"{f.get('default')!r} in the reference")
        elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if elem not in PRIMITIVES and low is not None:
            # a struct whose field is absent below the cut keeps the reference's fields
            old_fields = self._old_struct(o)
            if "fields" in f:
                m["fields"] = self.fields(f["fields"], old_fields, path)
            elif elem not in self.common:
                if elem not in self.ref_common:
                    raise ValueError(f"{path}: unknown struct {elem}")
                self.common[elem] = []  # reserve before recursing
                self.common[elem] = self.fields(self.ref_common[elem], old_fields, path)
        return m

    def _old_only(self, o: dict[str, Any], path: str) -> dict[str, Any]:
        cut = self.cut
        m = {k: v for k, v in o.items() if k not in ("fields", "tag", "taggedVersions")}
        if "tag" in o and _clip(parse_range(o.get("taggedVersions", o["versions"])), cut - 1):
            raise ValueError(f"{path}: tagged below v{cut} in the older specs")
        m["versions"] = fmt_range(_clip(parse_range(o["versions"]), cut - 1))
        n = _clip(parse_range(o.get("nullableVersions")), cut - 1)
        m.pop("nullableVersions", None)
        if n is not None:
            m["nullableVersions"] = fmt_range(n)
        elem = o["type"][2:] if o["type"].startswith("[]") else o["type"]
        if elem not in PRIMITIVES:
            if elem in self.ref_common:
                raise ValueError(f"{path}: struct {elem} of a removed field clashes with the reference")
            m["fields"] = self.fields([], self._old_struct(o), path)
        return m


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        v = value.strip()
        if v == "null":
            return None
        if v in ("true", "false"):
            return v == "true"
        try:
            return int(v, 0)
        except ValueError:
            return v
    return value


def merge_spec(ref: dict[str, Any], old: dict[str, Any], source: str) -> dict[str, Any]:
    """``ref`` with the versions of ``old`` below ``ref``'s lowest valid version folded in.

    Returns ``ref`` itself when ``old`` adds no version. The merged spec carries
    ``_legacy`` = (the added versions, ``source``) for the generator to record.
    """
    valid = parse_range(ref["validVersions"])
    old_valid = parse_range(old["validVersions"])
    name = ref["name"]
    if valid is None or old_valid is None or old_valid[0] >= valid[0]:
        return ref
    cut = valid[0]
    if old_valid[1] < cut - 1:
        raise ValueError(f"{name}: the older specs stop at v{old_valid[1]}, the reference starts at v{cut}")
    for key in ("apiKey", "type"):
        if old.get(key) != ref.get(key):
            raise ValueError(f"{name}: {key} {old.get(key)!r} in the older specs, {ref.get(key)!r} in the reference")
    if (_clip(parse_range(old["flexibleVersions"]), cut - 1) is not None
            or _clip(parse_range(ref["flexibleVersions"]), cut - 1) is not None):
        raise ValueError(f"{name}: flexible versions below v{cut} are not supported by the merge")
    merger = _Merger(ref, old, cut)
    merged = {k: v for k, v in ref.items() if k not in ("fields", "commonStructs")}
    merged["validVersions"] = f"{old_valid[0]}-{valid[1]}"
    merged["fields"] = merger.fields(ref["fields"], old["fields"], name)
    if "commonStructs" in ref:
        # the reference's order; structs no merged field uses stay as they are
        merged["commonStructs"] = [
            {**c, "fields": merger.common.get(c["name"], c["fields"])} for c in ref["commonStructs"]]
    merged["_legacy"] = (fmt_range((old_valid[0], cut - 1)), source)
    return copy.deepcopy(merged)


def spec_from_decl(decl: Any) -> dict[str, Any]:
    """A committed declaration (``MessageDecl``) in spec form, every struct as a common one."""
    def field(f: Any) -> dict[str, Any]:
        d: dict[str, Any] = {"name": f.name, "type": f.type, "versions": f.versions}
        if f.nullable is not None:
            d["nullableVersions"] = f.nullable
        if f.tag is not None:
            d["tag"] = f.tag
            d["taggedVersions"] = f.tagged
        if f.has_default:
            d["default"] = f.default
        if f.flexible is not None:
            d["flexibleVersions"] = f.flexible
        if f.ignorable:
            d["ignorable"] = True
        return d

    spec: dict[str, Any] = {"name": decl.name, "type": decl.kind, "validVersions": decl.valid,
                            "flexibleVersions": decl.flexible,
                            "fields": [field(f) for f in decl.fields],
                            "commonStructs": [{"name": n, "fields": [field(f) for f in fs]}
                                              for n, fs in decl.structs.items()]}
    if decl.api_key is not None:
        spec["apiKey"] = decl.api_key
    return spec
