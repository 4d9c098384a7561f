"""Canonical JSON (RFC 8785, the JSON Canonicalization Scheme) and its SHA-256, so that a
value hashes alike wherever and however it was serialized.

RFC 8785 as written: no whitespace; object members sorted by their names' UTF-16 code units;
strings as ECMAScript's `JSON.stringify` writes them (only `"`, `\\` and U+0000-U+001F
escaped, as `\\b \\t \\n \\f \\r` or `\\u00xx`; everything else as UTF-8); numbers as
ECMAScript's `Number.prototype.toString` writes a double (`1e+21`, `1e-7`, `0.5`, `-0` as
`0`). Two inputs RFC 8785 refuses get a rule of their own instead, so that no value the
gateway stores is left out:
- an integer beyond 2**53 is written exactly, in decimal (a double would round it, and two
  different integers would then hash alike);
- a lone UTF-16 surrogate (JSON allows `"\\ud800"`; UTF-8 cannot carry it) is written as its
  `\\udxxx` escape, as ECMAScript 2019's well-formed `JSON.stringify` does.
"""

from __future__ import annotations

import hashlib
import math
import re
from decimal import Decimal
from json.encoder import encode_basestring  # in C
from typing import Any

_EXACT_DOUBLE = 2**53
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n"}
_SHORT_ESCAPES |= {"\f": "\\f", "\r": "\\r"}
_ESCAPED = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def canonical(value: Any) -> str:
    """`value` (what `json.loads` returns: dict, list, str, int, float, bool, None) as
    canonical JSON text."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value)  # exact, within 2**53 and beyond (see the module's docstring)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{canonical(v)}" for k, v in _members(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def sha256_hex(value: Any) -> str:
    """The SHA-256 of `value`'s canonical JSON, in lowercase hex."""
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def _members(value: dict[Any, Any]) -> list[tuple[str, Any]]:
    """An object's members in RFC 8785 order: by UTF-16 code units, which for ASCII names
    (the common case: a check CPython answers at once) is plain string order."""
    if all(type(name) is str and name.isascii() for name in value):
        return sorted(value.items())  # names are unique: values are never compared
    return sorted(value.items(), key=lambda item: _utf16(item[0]))


def _utf16(name: str) -> bytes:
    if not isinstance(name, str):
        raise TypeError(f"an object's member name must be a string, not {name!r}")
    return name.encode("utf-16-be", "surrogatepass")  # big-endian: byte order = unit order


def _string(text: str) -> str:
    if _SURROGATE.search(text) is None:
        return encode_basestring(text)  # the same escapes, in C
    return '"' + _ESCAPED.sub(_escape, text) + '"'


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _number(value: float) -> str:
    """ECMAScript's Number::toString of a double (ECMA-262 §6.1.6.1.20): the shortest
    digits that read back as the same double (Python's repr finds the same ones)."""
    if not math.isfinite(value):
        raise ValueError("NaN and Infinity are not JSON")
    if value == 0:
        return "0"  # and -0
    if value.is_integer() and abs(value) < _EXACT_DOUBLE:
        return str(int(value))
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exponent, int)  # a finite number
    point = len("".join(map(str, digit_tuple))) + exponent  # the decimal point's position
    return sign + _place_point(digits, point)


def _place_point(digits: str, point: int) -> str:
    """`0.digits * 10**point` written as ECMAScript does."""
    count = len(digits)
    if count <= point <= 21:
        return digits + "0" * (point - count)
    if 0 < point <= 21:
        return f"{digits[:point]}.{digits[point:]}"
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    mantissa = digits[0] + (f".{digits[1:]}" if count > 1 else "")
    power = point - 1
    return f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"
