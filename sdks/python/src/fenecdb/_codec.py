"""Values on the wire: parameters go as JSON with datetimes as ISO-8601 UTC
text; answers come back as :class:`Rows` or :class:`Affected`, carrying the
answer's ``Fenec-Seq`` and ``Idempotent-Replayed``, with each column that
the collection declares ``timestamp`` (``GET /collections``) made a
timezone-aware datetime — by the declared type, never by a string's shape
(docs/sdks.md)."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

Row = Dict[str, Any]
"""One row: its columns in the order the server sent them."""


class Rows(List[Row]):
    """A statement's rows (a read's, or a write's with ``returning``): a
    list, with the answer's ``seq`` (``Fenec-Seq``: the database's change
    number after a write, else ``None``) and ``replayed`` (``True`` when the
    answer is a replay of an earlier one with the same Idempotency-Key)."""

    seq: Optional[int] = None
    replayed: bool = False


class Affected(int):
    """How many documents a write without ``returning`` wrote: an ``int``,
    with ``seq`` and ``replayed`` as :class:`Rows` has them."""

    seq: Optional[int] = None
    replayed: bool = False


Answer = Union[Rows, Affected]
"""A statement's answer: its rows, or how many documents a write wrote."""


class Results(List[Answer]):
    """A ``/batch``'s answers, one per statement, with ``seq`` and
    ``replayed`` of the whole batch."""

    seq: Optional[int] = None
    replayed: bool = False


def timestamp_text(value: datetime) -> str:
    """``value`` as the server writes a timestamp: ``2026-05-03T09:20:00.000Z``.
    A naive datetime is refused: it names no moment."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{value!r} is naive: give it a timezone (datetime.timezone.utc) so it names one moment")
    text = value.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def check_finite(value: Any, where: str) -> None:
    """Refuses NaN and ±infinity at any depth of ``value``: JSON has no such
    number, and the call that takes one is where it is wrong."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} is not a finite number (JSON has no NaN or infinity)")
    if isinstance(value, Mapping):
        for v in value.values():
            check_finite(v, where)
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_finite(v, where)


def to_json(value: Any) -> Any:
    """``value`` with every datetime in it (at any depth) made ISO-8601 UTC text."""
    if isinstance(value, datetime):
        return timestamp_text(value)
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def parse_timestamp(text: str) -> datetime:
    """A timestamp as the server writes it (ISO-8601 UTC), as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


# The statement's collection: the name after its verb.
_TARGET = re.compile(r"\s*(?:get|set|del|insert)\s+([A-Za-z_][A-Za-z0-9_]*)")

Types = Dict[str, Dict[str, str]]
"""Each collection's fields and their declared types, as ``/collections`` says."""


def target(query: str) -> Optional[str]:
    """The collection a statement reads or writes, when it is one of
    ``get``/``set``/``del``/``insert``."""
    m = _TARGET.match(query)
    return m.group(1) if m else None


def needs_types(types: Types, query: str, rows: Sequence[Row]) -> bool:
    """Whether decoding these rows needs ``/collections`` (again): a column
    holding text whose collection or field is not known yet."""
    coll = target(query)
    if coll is None:
        return False
    known = types.get(coll)
    for row in rows:
        for name, value in row.items():
            if isinstance(value, str) and (known is None or name not in known):
                return True
    return False


def decode_rows(types: Types, query: str, rows: Sequence[Row]) -> List[Row]:
    """The rows, each column its collection declares ``timestamp`` made an
    aware datetime; every other column as the JSON said."""
    coll = target(query)
    fields = types.get(coll, {}) if coll else {}
    stamps = {name for name, kind in fields.items() if kind == "timestamp"}
    if not stamps:
        return list(rows)
    out = []
    for row in rows:
        out.append({k: parse_timestamp(v) if k in stamps and isinstance(v, str) else v for k, v in row.items()})
    return out
