"""Values on the wire: parameters go as JSON with datetimes as ISO-8601 UTC
text; answers come back with timestamps as timezone-aware datetimes."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Sequence, Union

Row = Dict[str, Any]
"""One row: its columns in the order the server sent them."""

Answer = Union[List[Row], int]
"""A statement's answer: its rows, or how many documents a write without
``returning`` wrote."""

# The one shape the server writes timestamps in (docs/http.md, Time): UTC,
# milliseconds.
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


def timestamp_text(value: datetime) -> str:
    """``value`` as the server writes a timestamp: ``2026-05-03T09:20:00.000Z``.
    A naive datetime is refused: it names no moment."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{value!r} is naive: give it a timezone (datetime.timezone.utc) so it names one moment")
    text = value.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def to_json(value: Any) -> Any:
    """``value`` with every datetime in it (at any depth) made ISO-8601 UTC text."""
    if isinstance(value, datetime):
        return timestamp_text(value)
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def _value(value: Any) -> Any:
    if isinstance(value, str) and _TIMESTAMP.match(value):
        try:
            return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        except ValueError:  # the shape, but no such moment (month 13): keep the text
            return value
    return value


def decode_rows(rows: Sequence[Row]) -> List[Row]:
    """The rows, each column holding a timestamp's text made an aware datetime."""
    return [{k: _value(v) for k, v in row.items()} for row in rows]


def decode_answer(body: Any) -> Answer:
    """A ``/query`` answer: rows (decoded), or a write's ``affected`` count."""
    if isinstance(body, list):
        return decode_rows(body)
    if isinstance(body, dict) and isinstance(body.get("affected"), int):
        return int(body["affected"])
    raise ValueError(f"not a Fenec answer: {body!r}")
