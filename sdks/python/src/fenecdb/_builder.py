"""The query builder: an immutable chain that renders FenecQL text with ``$n``
parameters. Every Fenec SDK renders the same text for the same chain
(``conformance/builder-golden.json``); nothing here sends anything."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ._codec import check_finite

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not in")
_MISSING: Any = object()


@dataclass(frozen=True)
class Statement:
    """One FenecQL statement and its ``$1…$n`` parameters, as sent to ``/query``
    or as one item of ``db.batch([...])``."""

    query: str
    params: Tuple[Any, ...] = ()
    collection: Optional[str] = field(default=None, compare=False)
    """The collection a builder rendered it for: its rows decode by that
    collection's declared field types (text statements' rows are left as
    the JSON says)."""


@dataclass(frozen=True, init=False)
class _Fragment:
    text: str
    args: Tuple[Any, ...]

    def __init__(self, text: str, *args: Any) -> None:
        if not isinstance(text, str):
            raise TypeError(f"{type(self).__name__.lower()}() takes its text first, got {text!r}")
        what = f"{type(self).__name__.lower()}({text!r})"
        for arg in args:
            check_finite(arg, what)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "args", args)


class Raw(_Fragment):
    """A condition written in FenecQL; made by :func:`raw`."""


class Expr(_Fragment):
    """A value written in FenecQL; made by :func:`expr`."""


@dataclass(frozen=True)
class Inc:
    """A field moved on by a number; made by :func:`inc`."""

    by: Union[int, float]


def raw(text: str, *args: Any) -> Raw:
    """A condition for ``where``, written in FenecQL: each ``?`` outside a
    string literal becomes the next parameter.

    ``jobs.where(raw("run_at <= now() - ?", 60000))``"""
    return Raw(text, *args)


def expr(text: str, *args: Any) -> Expr:
    """A value for a patch or a document, written in FenecQL: each ``?``
    outside a string literal becomes the next parameter.

    ``{"run_at": expr("now() + ?", 30000)}``"""
    return Expr(text, *args)


def inc(by: Union[int, float] = 1) -> Inc:
    """A patch value adding ``by`` to the field's own value:
    ``{"attempts": inc(1)}`` renders ``attempts: coalesce(attempts, 0) + $n``,
    so a field never set counts from 0."""
    if isinstance(by, bool) or not isinstance(by, (int, float)):
        raise ValueError(f"inc() takes a finite number, got {by!r}")
    check_finite(by, "inc()")
    return Inc(by)


class _Params:
    """Numbers parameters ``$1…$n`` in the order they appear in the text."""

    def __init__(self) -> None:
        self.values: List[Any] = []

    def add(self, value: Any) -> str:
        """A plain value's ``$n``."""
        if isinstance(value, Raw):
            raise TypeError("raw() is a condition for where(), not a value: use expr()")
        if isinstance(value, Inc):
            raise TypeError("inc() stands only as a value of an update's patch")
        if isinstance(value, Expr):
            raise TypeError("expr() cannot stand here")
        check_finite(value, "a value")
        self.values.append(value)
        return f"${len(self.values)}"

    def value(self, value: Any) -> str:
        """A value's text: an ``expr(...)``'s, or its ``$n``."""
        return self.fill(value) if isinstance(value, Expr) else self.add(value)

    def fill(self, fragment: _Fragment) -> str:
        """The fragment's text with each ``?`` outside a '…' or "…" literal
        replaced by the next parameter."""
        what = f"{type(fragment).__name__.lower()}({fragment.text!r})"
        out: List[str] = []
        args = iter(fragment.args)
        quote = ""
        escaped = False
        used = 0
        for i, ch in enumerate(fragment.text):
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch == "$" and fragment.text[i + 1 : i + 2].isdigit():
                raise ValueError(f"{what} has a $n parameter of its own: mark each value with ? instead")
            elif ch == "?":
                arg = next(args, _MISSING)
                if arg is _MISSING:
                    raise ValueError(f"{what} has more ? marks than the {used} values given")
                ch = self.add(arg)
                used += 1
            out.append(ch)
        if used != len(fragment.args):
            raise ValueError(f"{what} has {used} ? marks for {len(fragment.args)} values")
        return "".join(out)


def _name(kind: str, name: object, pattern: re.Pattern[str] = _PATH) -> str:
    if not isinstance(name, str) or not pattern.match(name):
        raise ValueError(f"{kind} name {name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return name


def _count(what: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{what} takes a non-negative integer, got {n!r}")
    return n


def _fields(kind: str, names: Sequence[str]) -> Tuple[str, ...]:
    """A select or returning list: field names or paths, or ``*`` alone."""
    if isinstance(names, str) or not names:
        raise ValueError(f"{kind} takes one or more fields, got an empty list")
    if list(names) == ["*"]:
        return ("*",)
    return tuple(_name("field", n) for n in names)


def _doc_text(doc: Mapping[str, Any], params: _Params) -> str:
    if not isinstance(doc, Mapping):
        raise TypeError(f"insert takes a document (a dict) or a list of them, got {doc!r}")
    items = [f"{_name('field', key, _IDENT)}: {params.value(value)}" for key, value in doc.items()]
    return "{" + ", ".join(items) + "}"


def _patch_text(patch: Mapping[str, Any], params: _Params, what: str = "update") -> str:
    if not isinstance(patch, Mapping) or not patch:
        raise ValueError(f"{what} takes a patch (a dict) of one or more fields, got an empty {patch!r}")
    items = []
    for key, value in patch.items():
        key = _name("field", key, _IDENT)
        if value is None:
            text = "null"
        elif isinstance(value, Inc):
            text = f"coalesce({key}, 0) + {params.add(value.by)}"
        else:
            text = params.value(value)
        items.append(f"{key}: {text}")
    return "{" + ", ".join(items) + "}"


@dataclass(frozen=True)
class _Cond:
    field: str
    op: str
    value: Any


Returning = Union[bool, Sequence[str]]
"""``True`` (or ``["*"]``) answers every field (``returning *``); a list of
field names or paths answers those; ``False`` answers the count."""

_Q = TypeVar("_Q", bound="Query[Any]")
_DB = TypeVar("_DB")


@dataclass(frozen=True)
class Query(Generic[_DB]):
    """An immutable query on one collection of the client ``db``. Each method
    answers a new query; the ``render_*`` methods give the :class:`Statement`
    an endpoint sends, without sending it.

    Get one from a client (``db.collection("jobs")``), whose subclass adds the
    endpoints that send: ``rows``, ``first``, ``count``, ``insert``,
    ``update``, ``delete``."""

    name: str
    db: _DB = field(repr=False, compare=False)
    _where: Tuple[Union[_Cond, Raw], ...] = field(default=(), repr=False)
    _order: Tuple[str, ...] = field(default=(), repr=False)
    _limit: Optional[int] = field(default=None, repr=False)
    _offset: Optional[int] = field(default=None, repr=False)
    _select: Tuple[str, ...] = field(default=(), repr=False)
    _near: Optional[Tuple[str, Tuple[float, float], bool]] = field(default=None, repr=False)
    _absent: Optional[Tuple[Optional[Mapping[str, Any]]]] = field(default=None, repr=False)
    _kind: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        _name("collection", self.name, _IDENT)

    def where(self: _Q, field_or_raw: Union[str, Raw], op_or_value: Any = _MISSING, value: Any = _MISSING) -> _Q:
        """Keep the rows that match; several calls join with ``and``.

        - ``where("owner", owner)``: ``owner = $n`` (``where("owner", None)``:
          ``owner is null``);
        - ``where("attempts", ">=", 5)``: any of ``= != < <= > >= in``,
          ``not in`` (for ``in``, the value is one list);
        - a value may be ``expr(...)``: ``where("run_at", "<=", expr("now()"))``;
        - ``where(raw("run_at <= now()"))``: a condition in FenecQL."""
        if isinstance(field_or_raw, Raw):
            if op_or_value is not _MISSING:
                raise TypeError("where(raw(...)) takes no other argument")
            cond: Union[_Cond, Raw] = field_or_raw
        elif op_or_value is _MISSING:
            raise TypeError("where() takes a field and a value, a field, an operator and a value, or raw(...)")
        elif value is _MISSING:
            op = "is null" if op_or_value is None else "="
            check_finite(op_or_value, f"where({field_or_raw!r})")
            cond = _Cond(_name("field", field_or_raw), op, op_or_value)
        else:
            if op_or_value not in _OPS:
                raise ValueError(f"where() operator {op_or_value!r} is not one of {', '.join(_OPS)}")
            if op_or_value in ("in", "not in"):
                if not isinstance(value, (list, tuple)):
                    raise TypeError(f"where() operator {op_or_value!r} takes a list, got {value!r}")
                if not value:
                    raise ValueError(f"where({field_or_raw!r}, {op_or_value!r}, …) got an empty list: it would match nothing")
            check_finite(value, f"where({field_or_raw!r})")
            cond = _Cond(_name("field", field_or_raw), op_or_value, value)
        return replace(self, _where=self._where + (cond,))

    def order(self: _Q, field: str, direction: str = "asc") -> _Q:
        """Order the rows by ``field``, ``"asc"`` (the default) or ``"desc"``;
        several calls order by each in turn."""
        if direction not in ("asc", "desc"):
            raise ValueError(f"order direction {direction!r} is not 'asc' or 'desc'")
        key = _name("field", field) + (" desc" if direction == "desc" else "")
        return replace(self, _order=self._order + (key,))

    def limit(self: _Q, n: int) -> _Q:
        """Take at most ``n`` rows."""
        return replace(self, _limit=_count("limit", n))

    def offset(self: _Q, n: int) -> _Q:
        """Skip the first ``n`` rows."""
        return replace(self, _offset=_count("offset", n))

    def select(self: _Q, *fields: str) -> _Q:
        """Answer these fields (or paths, ``payload.to``) of each row,
        replacing an earlier select; ``select("*")`` answers every field, as
        no select does."""
        return replace(self, _select=_fields("select", fields))

    def near(self: _Q, field: str, point: Sequence[float], *, exact: bool = False) -> _Q:
        """Order the rows nearest first to ``point`` (``[longitude,
        latitude]``) over a ``@geo`` field: ``near field $n``, the order of
        ``order distance(field, point)``; ``exact=True`` renders
        ``near field $n exact`` (docs/fenecql.md). It replaces an earlier
        near and takes no ``order`` beside it."""
        name = _name("field", field)
        if (
            isinstance(point, (str, bytes))
            or not isinstance(point, Sequence)
            or len(point) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in point)
        ):
            raise ValueError(f"near({name!r}): a point is [longitude, latitude], got {point!r}")
        check_finite(list(point), f"near({name!r})")
        return replace(self, _near=(name, (point[0], point[1]), exact is True))

    def if_absent(self: _Q) -> _Q:
        """Make :meth:`insert` write only documents not there yet:
        ``put c {…} if absent``, which answers 1, or 0 when a document already
        holds its ``id`` or one of its ``@unique`` values (writing nothing)."""
        return replace(self, _absent=(None,))

    def upsert(self: _Q, set: Mapping[str, Any]) -> _Q:
        """Make :meth:`insert` an upsert: ``put c {…} if absent else set {…}``
        writes the document when it is not there, and else applies ``set`` to
        the one that is. In ``set`` a bare field reads the stored document and
        ``expr("new.f")`` the incoming one; ``inc(n)`` counts from 0."""
        return replace(self, _absent=(set,))

    def render_rows(self) -> Statement:
        """The statement :meth:`rows` sends."""
        self._refuse("a read", "absent")
        params = _Params()
        parts = [f"get {self.name}"]
        if self._select:
            parts.append("select " + ", ".join(self._select))
        parts += self._tail(params)
        return Statement(" ".join(parts), tuple(params.values), self.name)

    def render_first(self) -> Statement:
        """The statement :meth:`first` sends: :meth:`render_rows` with ``limit 1``."""
        return replace(self, _limit=1).render_rows()

    def render_count(self) -> Statement:
        """The statement :meth:`count` sends."""
        self._refuse("count", "absent")
        params = _Params()
        parts = [f"get {self.name}", *self._conditions(params), "count"]
        return Statement(" ".join(parts), tuple(params.values), self.name)

    def render_insert(self, docs: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> Statement:
        """The statement :meth:`insert` sends: one document, or a list of them."""
        self._refuse("insert", "where", "order", "limit", "offset", "select", "near")
        params = _Params()
        if isinstance(docs, Mapping):
            text = _doc_text(docs, params)
        else:
            if isinstance(docs, (str, bytes)) or not docs:
                raise ValueError(f"insert takes a document or a list of one or more, got an empty {docs!r}")
            text = "[" + ", ".join(_doc_text(d, params) for d in docs) + "]"
        if self._absent is None:
            return Statement(f"insert {self.name} {text}", tuple(params.values), self.name)
        (set_,) = self._absent
        tail = "" if set_ is None else " else set " + _patch_text(set_, params, "upsert")
        return Statement(f"put {self.name} {text} if absent{tail}", tuple(params.values), self.name)

    def render_update(
        self, patch: Mapping[str, Any], *, returning: Returning = False, require: Optional[int] = None
    ) -> Statement:
        """The statement :meth:`update` sends."""
        self._refuse("update", "offset", "select", "absent")
        params = _Params()
        parts = [f"set {self.name} {_patch_text(patch, params)}"]
        parts += self._tail(params)
        parts += self._write_tail(returning, require)
        return Statement(" ".join(parts), tuple(params.values), self.name)

    def render_delete(self, *, returning: Returning = False, require: Optional[int] = None) -> Statement:
        """The statement :meth:`delete` sends."""
        self._refuse("delete", "offset", "select", "absent")
        params = _Params()
        parts = [f"del {self.name}", *self._tail(params), *self._write_tail(returning, require)]
        return Statement(" ".join(parts), tuple(params.values), self.name)

    def _refuse(self, endpoint: str, *clauses: str) -> None:
        for clause in clauses:
            if getattr(self, "_" + clause) not in (None, ()):
                name = "if_absent or upsert" if clause == "absent" else clause
                raise ValueError(f"{name} does not apply to {endpoint}")

    def _conditions(self, params: _Params) -> List[str]:
        if not self._where:
            return []
        wrap = len(self._where) > 1
        texts = []
        for cond in self._where:
            if isinstance(cond, Raw):
                text = params.fill(cond)
                texts.append(f"({text})" if wrap else text)
            elif cond.op == "is null":
                texts.append(f"{cond.field} is null")
            else:
                texts.append(f"{cond.field} {cond.op} {params.value(cond.value)}")
        return ["where " + " and ".join(texts)]

    def _tail(self, params: _Params) -> List[str]:
        parts = self._conditions(params)
        if self._near is not None:
            field, point, exact = self._near
            if self._order:
                raise ValueError(f"near({field!r}) orders the rows: it takes no order beside it")
            parts.append(f"near {field} {params.add(list(point))}" + (" exact" if exact else ""))
        if self._order:
            parts.append("order " + ", ".join(self._order))
        if self._limit is not None:
            parts.append(f"limit {self._limit}")
        if self._offset is not None:
            parts.append(f"offset {self._offset}")
        return parts

    @staticmethod
    def _write_tail(returning: Returning, require: Optional[int]) -> List[str]:
        parts = []
        if returning is True:
            parts.append("returning *")
        elif returning is not False:
            parts.append("returning " + ", ".join(_fields("returning", returning)))
        if require is not None:
            parts.append(f"require {_count('require', require)}")
        return parts
