"""Values on the wire: parameters go as JSON with datetimes as ISO-8601 UTC
text; answers come back as :class:`Rows` or :class:`Affected`, carrying the
answer's ``Fenec-Seq`` and ``Idempotent-Replayed``, with each column that
the collection declares ``timestamp`` (``GET /collections``) made a
timezone-aware datetime — by the declared type, never by a string's shape
(docs/sdks.md)."""

from __future__ import annotations

import dataclasses
import math
from collections import abc
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Union

Row = Dict[str, Any]
"""One row: its columns in the order the server sent them."""


class Rows(List[Row]):
    """A statement's rows (a read's, or a write's with ``returning``): a
    list, carrying the result as docs/sdks.md names it — ``rows`` (itself),
    ``affected`` (how many rows), ``seq`` (``Fenec-Seq``: the database's
    change number after a request that wrote, else 0) and ``replayed``
    (``True`` when this is the first answer to the request's
    Idempotency-Key, replayed: nothing was written)."""

    seq: int = 0
    replayed: bool = False

    @property
    def rows(self) -> "Rows":
        return self

    @property
    def affected(self) -> int:
        return len(self)


class Affected(int):
    """How many documents a write without ``returning`` wrote: an ``int``,
    with ``rows`` (``None``), ``affected`` (itself), ``seq`` and
    ``replayed`` as :class:`Rows` has them."""

    seq: int = 0
    replayed: bool = False

    @property
    def rows(self) -> None:
        return None

    @property
    def affected(self) -> int:
        return int(self)


Answer = Union[Rows, Affected]
"""A statement's answer: its rows, or how many documents a write wrote."""


class Results(List[Answer]):
    """A ``/batch``'s answers, one per statement, with the ``seq`` and
    ``replayed`` of the whole batch."""

    seq: int = 0
    replayed: bool = False


def timestamp_text(value: datetime) -> str:
    """``value`` as the server writes a timestamp: ``2026-05-03T09:20:00.000Z``.
    A naive datetime is refused: it names no moment."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{value!r} is naive: give it a timezone (datetime.timezone.utc) so it names one moment")
    text = value.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


_PLAIN = frozenset({str, int, bool, type(None)})
"""The types a value to send most often has, and that need no look inside:
checked first, by the type itself (``isinstance`` against ``Mapping`` is
slow, and a worker sends ids by the hundred)."""


def check_finite(value: Any, where: str) -> None:
    """Refuses NaN and ±infinity at any depth of ``value``: JSON has no such
    number, and the call that takes one is where it is wrong."""
    if type(value) in _PLAIN:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} is not a finite number (JSON has no NaN or infinity)")
    if isinstance(value, (list, tuple)):
        for v in value:
            if type(v) not in _PLAIN:
                check_finite(v, where)
    elif isinstance(value, abc.Mapping):
        for v in value.values():
            if type(v) not in _PLAIN:
                check_finite(v, where)


def to_json(value: Any) -> Any:
    """``value`` with every datetime in it (at any depth) made ISO-8601 UTC text."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, datetime):
        return timestamp_text(value)
    if isinstance(value, abc.Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _PLAIN else to_json(v) for v in value]
    return value


def parse_timestamp(text: str) -> datetime:
    """A timestamp as the server writes it (ISO-8601 UTC), as an aware datetime."""
    if text.endswith("Z"):  # as the server writes it: UTC already
        return datetime.fromisoformat(text[:-1] + "+00:00")
    return datetime.fromisoformat(text).astimezone(timezone.utc)


Types = Dict[str, Dict[str, str]]
"""Each collection's fields and their declared types, as ``/collections`` says."""


def missing(types: Types, collection: Optional[str], rows: Any) -> Set[str]:
    """The columns of these rows the collection's known types lack: fields
    added (or a collection made) since they were loaded — or columns no
    field declares (``count``, a path), which the caller learns to skip."""
    if collection is None or not isinstance(rows, list):
        return set()
    known = types.get(collection, {})
    # ``id`` is every document's, and /collections lists only the declared
    # fields: it is no news (a worker's claim answers it in every row).
    return {k for row in rows if isinstance(row, dict) for k in row if k not in known and k != "id"}


def decode_rows(types: Types, collection: Optional[str], rows: Sequence[Row]) -> List[Row]:
    """The rows, each column its collection declares ``timestamp`` made an
    aware datetime; every other column — and every column of a statement
    sent as text — as the JSON said. The rows are changed in place (they
    are an answer's own, just parsed): only their timestamps are visited."""
    fields = types.get(collection, {}) if collection else {}
    stamps = [name for name, kind in fields.items() if kind == "timestamp"]
    if stamps:
        for row in rows:
            for k in stamps:
                v = row.get(k)
                if isinstance(v, str):
                    row[k] = parse_timestamp(v)
    return list(rows)


def check_kind(kind: Any) -> Any:
    """A row type ``db.from_(name, kind)`` takes: a TypedDict, a dataclass,
    or a pydantic model (a class with ``model_validate``); else a
    TypeError now."""
    if isinstance(kind, type) and (issubclass(kind, dict) or dataclasses.is_dataclass(kind) or callable(getattr(kind, "model_validate", None))):
        return kind
    raise TypeError(f"a row type is a TypedDict, a dataclass or a pydantic model, got {kind!r}")


def row_as(kind: Any, row: Row) -> Any:
    """A row as ``kind``: a TypedDict's row as it is (a dict), a
    dataclass made from the columns it has fields for (a field without a
    default that the row lacks: a TypeError naming it), a pydantic model
    validated."""
    if issubclass(kind, dict):
        return row
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        made: Any = kind
        fields = {f.name: f for f in dataclasses.fields(kind) if f.init}
        lacking = [
            n for n, f in fields.items()
            if n not in row and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if lacking:
            raise TypeError(f"a row has no {', '.join(lacking)} for {made.__name__}: {row!r}")
        return made(**{k: v for k, v in row.items() if k in fields})
    return kind.model_validate(row)


def doc_of(doc: Any) -> Any:
    """A document to write: a dataclass instance as its fields (a pydantic
    model's ``model_dump()``), anything else as it is."""
    if dataclasses.is_dataclass(doc) and not isinstance(doc, type):
        return {f.name: getattr(doc, f.name) for f in dataclasses.fields(doc)}
    dump = getattr(doc, "model_dump", None)
    return dump() if callable(dump) and not isinstance(doc, type) else doc
