"""The principal of a TLS client certificate, as Kafka's default principal builder makes it.

The subject is written as RFC 2253 distinguished name, the form Java's
``X500Principal.getName()`` gives (most specific RDN first)::

    dn     = rdn *("," rdn)
    rdn    = ava *("+" ava)                    ; a multi-valued RDN
    ava    = type "=" value
    type   = CN | C | L | ST | O | OU | STREET | DC | UID      ; the RFC 2253 keywords
           | dotted-oid                         ; any other type, its value as "#" hex DER
    value  = the text with  , = + < > # ; " \\  escaped by "\\", NUL as "\\00",
             leading and trailing spaces escaped

The escaping is what keeps a certificate whose common name is ``admin,O=Corp`` from
becoming ``CN=admin,O=Corp``: it is ``CN=admin\\,O\\=Corp``.

``PrincipalMapper(rules)`` is Kafka's ``ssl.principal.mapping.rules``: a comma-separated list
of ``RULE:pattern/replacement/[L|U]`` and ``DEFAULT`` tried in order; the first rule whose
pattern matches the whole name gives the principal name (``$1``... refer to the pattern's
groups; ``L``/``U`` lower or upper the result), ``DEFAULT`` gives the name unchanged. A name
no rule matches is refused (:class:`NoMatchingRule`): the connection is closed.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["distinguished_name", "PrincipalMapper", "NoMatchingRule", "DEFAULT_RULES"]

DEFAULT_RULES = "DEFAULT"

# OpenSSL's long names (what ssl.getpeercert() gives) -> RFC 2253 keyword
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
             "stateOrProvinceName": "ST", "organizationName": "O",
             "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
# other types: their OID and the DER string tag their values are usually encoded with
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16),      # IA5String
         "serialNumber": ("2.5.4.5", 0x13),                   # PrintableString
         "title": ("2.5.4.12", 0x0C), "surname": ("2.5.4.4", 0x0C),
         "givenName": ("2.5.4.42", 0x0C), "initials": ("2.5.4.43", 0x0C),
         "pseudonym": ("2.5.4.65", 0x0C), "generationQualifier": ("2.5.4.44", 0x0C),
         "dnQualifier": ("2.5.4.46", 0x13), "name": ("2.5.4.41", 0x0C),
         "businessCategory": ("2.5.4.15", 0x0C), "postalCode": ("2.5.4.17", 0x0C)}
_OID_TEXT = re.compile(r"[0-9]+(\.[0-9]+)+")
_SPECIAL = frozenset(',=+<>#;"\\')


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` rule applies to a certificate's name."""


def _escape(value: str) -> str:
    out = []
    for ch in value:
        if ch in _SPECIAL:
            out.append("\\" + ch)
        elif ch == "\0":
            out.append("\\00")
        else:
            out.append(ch)
    text = "".join(out)
    # leading and trailing spaces are escaped one by one (RFC 2253 section 2.4)
    body = text.strip(" ")
    if not body:
        return "\\ " * len(text)
    lead = len(text) - len(text.lstrip(" "))
    trail = len(text) - len(text.rstrip(" "))
    return "\\ " * lead + body + "\\ " * trail


def _der_hex(tag: int, value: str) -> str:
    data = value.encode("utf-8")
    n = len(data)
    if n < 0x80:
        length = bytes((n,))
    else:
        size = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes((0x80 | len(size),)) + size
    return "#" + (bytes((tag,)) + length + data).hex()


def _ava(key: str, value: str) -> str:
    keyword = _KEYWORDS.get(key)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    if key in _OIDS:
        oid, tag = _OIDS[key]
        return f"{oid}={_der_hex(tag, value)}"
    if _OID_TEXT.fullmatch(key):
        return f"{key}={_der_hex(0x0C, value)}"
    # a type OpenSSL names but this table does not: its name, escaped like a value, so
    # that it cannot pose as another attribute
    return f"{_escape(key)}={_escape(value)}"


def distinguished_name(cert: dict[str, Any]) -> str:
    """The RFC 2253 subject of ``ssl.SSLObject.getpeercert()``'s dict ('' if none)."""
    rdns = cert.get("subject", ())
    return ",".join("+".join(_ava(str(k), str(v)) for k, v in rdn)
                    for rdn in reversed(rdns) if rdn)


# ------------------------------------------------------------------ mapping rules
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_BACKREF = re.compile(r"\$(\d+)")


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "",
                 case: str = "") -> None:
        self.pattern = None if pattern is None else re.compile(pattern)
        self.replacement = replacement
        self.case = case

    def __repr__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}/{self.case}"

    def _expand(self, m: re.Match[str]) -> str:
        """Java's replacement syntax: ``$N`` a group (the longest number that names one;
        a number naming none stays literal), ``\\x`` the character x."""
        groups = self.pattern.groups if self.pattern is not None else 0
        out, i, text = [], 0, self.replacement
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if ch == "$":
                digits = _BACKREF.match(text, i)
                if digits is not None and not digits.group(1).startswith("0"):
                    num = digits.group(1)
                    while len(num) > 1 and int(num) > groups:
                        num = num[:-1]
                    if 0 < int(num) <= groups:
                        out.append(m.group(int(num)) or "")
                        i += 1 + len(num)
                        continue
            out.append(ch)
            i += 1
        return "".join(out)

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(self._expand, name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules`` (default ``DEFAULT``); a bad rule is a
    ``ValueError`` naming it."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        text = (DEFAULT_RULES if rules is None else rules).strip()
        self.rules: list[_Rule] = []
        pos = 0
        while pos < len(text):
            m = _SPLITTER.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule at "
                                 f"{text[pos:]!r}")
            pos = m.end()
            if m.group(2):
                self.rules.append(_Rule())
            elif m.group(1).startswith("RULE:"):
                if m.group(6):
                    raise ValueError(f"ssl.principal.mapping.rules: invalid rule "
                                     f"{m.group(1)!r}: unmatched {m.group(6)!r}")
                try:
                    self.rules.append(_Rule(m.group(3), m.group(4), m.group(5)))
                except re.error as exc:
                    raise ValueError(f"ssl.principal.mapping.rules: bad pattern in "
                                     f"{m.group(1)!r}: {exc}") from None

    def __repr__(self) -> str:
        return f"PrincipalMapper({','.join(map(repr, self.rules))!r})"

    def name(self, distinguished: str) -> str:
        for rule in self.rules:
            out = rule.apply(distinguished)
            if out is not None:
                return out
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to "
                             f"{distinguished!r}")
