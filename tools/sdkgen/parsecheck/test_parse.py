"""The C#, Swift and Dart transports, read by real parsers (tree-sitter's
grammars) and checked against openapi.yaml.

No compiler for these languages runs here (docs/sdks.md, SDKs to come), so
this is what catches a template mistake: a file that does not parse (an
ERROR or MISSING node anywhere in its tree, or a declared name its language
reserves, which the grammars let pass), or a model, route, header or call
that is not what openapi.yaml says. Every expectation below is worked
out from openapi.yaml itself, never from tools/sdkgen's model, and every
fact about a generated file is read from its parse tree.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any, Iterator

import pytest
import tree_sitter
import tree_sitter_c_sharp
import tree_sitter_dart
import tree_sitter_swift
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
SPEC = yaml.safe_load((ROOT / "openapi.yaml").read_text())
SCHEMAS: dict[str, Any] = SPEC["components"]["schemas"]

FILES = {
    "csharp": (tree_sitter_c_sharp, ROOT / "sdks/dotnet/src/FenecDb/Transport.g.cs"),
    "swift": (tree_sitter_swift, ROOT / "sdks/swift/Sources/FenecDB/Transport.swift"),
    "dart": (tree_sitter_dart, ROOT / "sdks/dart/lib/src/transport.g.dart"),
}

# The hand-written files beside them, parsed too.
BESIDE = [
    (tree_sitter_swift, ROOT / "sdks/swift/Package.swift"),
    (tree_sitter_dart, ROOT / "sdks/dart/lib/fenecdb.dart"),
]

# The client's own error codes, after the API's (as every SDK has them).
CLIENT_CODES = ["network", "timeout", "unexpected"]


# --- names, as tools/sdkgen spells them (funcs.go's words) ---------------

def words(s: str) -> list[str]:
    out: list[str] = []
    cur = ""
    for i, r in enumerate(s):
        if r in "-_/" or r.isspace():
            if cur:
                out.append(cur)
            cur = ""
        elif r.isupper() and i > 0 and s[i - 1].islower():
            if cur:
                out.append(cur)
            cur = r
        else:
            cur += r
    if cur:
        out.append(cur)
    return out


def pascal(s: str) -> str:
    return "".join(w.lower().capitalize() for w in words(s))


def camel(s: str) -> str:
    p = pascal(s)
    return p[:1].lower() + p[1:]


# Words each language refuses as an identifier, which tree-sitter's
# grammars accept (they parse `case internal = "internal"` in Swift): a
# declared name that is one fails test_no_reserved_names. Swift's may stand
# in backticks.
RESERVED = {
    "swift": set("""associatedtype class deinit enum extension fileprivate func import init
        inout internal let operator private precedencegroup protocol public rethrows static struct
        subscript typealias var break case catch continue default defer do else fallthrough for
        guard if in repeat return throw switch where while Any as await false is nil self Self
        super throws true try""".split()),
    "dart": set("""assert break case catch class const continue default do else enum extends
        false final finally for if in is new null rethrow return super switch this throw true
        try var void while with""".split()),
    "csharp": set("""abstract as base bool break byte case catch char checked class const continue
        decimal default delegate do double else enum event explicit extern false finally fixed
        float for foreach goto if implicit in int interface internal is lock long namespace new
        null object operator out override params private protected public readonly ref return
        sbyte sealed short sizeof stackalloc static string struct switch this throw true try
        typeof uint ulong unchecked unsafe ushort using virtual void volatile while""".split()),
}

# The nodes that declare a name, per language: (node type, field).
DECLARING = {
    "swift": [("enum_entry", "name"), ("pattern", "bound_identifier"), ("parameter", "name"), ("function_declaration", "name")],
    "dart": [("initialized_identifier", None), ("enum_constant", "name"), ("formal_parameter", "name"), ("static_final_declaration", None)],
    "csharp": [("property_declaration", "name"), ("enum_member_declaration", "name"), ("parameter", "name"), ("variable_declarator", "name"), ("method_declaration", "name")],
}


def bare(name: str) -> str:
    """A Swift name without its backticks."""
    return name[1:-1] if name.startswith("`") and name.endswith("`") else name


def type_name(name: str) -> str:
    """A schema's type name: Error is ErrorBody (Swift's Error protocol,
    Dart's Error class), as in the TS and Python transports."""
    return "ErrorBody" if name == "Error" else name


# --- openapi.yaml, read here ---------------------------------------------

def kind(s: dict[str, Any]) -> str:
    if "$ref" in s:
        return "ref"
    if "oneOf" in s or "anyOf" in s:
        return "union"
    t = s.get("type")
    if t == "array":
        return "array"
    if t == "object" or "properties" in s:
        return "object"
    if t in ("string", "integer", "number", "boolean"):
        return t
    return "any"


def ref_name(s: dict[str, Any]) -> str:
    return s["$ref"].rsplit("/", 1)[1]


def allows_null(s: dict[str, Any]) -> bool:
    return bool(s.get("nullable")) or None in s.get("enum", [])


def raw(s: dict[str, Any]) -> bool:
    """JSON kept as it is: any, a union, or a ref to one."""
    if kind(s) == "ref":
        return raw(SCHEMAS[ref_name(s)])
    return kind(s) in ("any", "union")


def records() -> dict[str, dict[str, Any]]:
    """The object schemas with properties: a type of their own everywhere."""
    return {n: s for n, s in SCHEMAS.items() if kind(s) == "object" and s.get("properties")}


def aliases() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in SCHEMAS.items() if n not in records()}


def operations() -> Iterator[dict[str, Any]]:
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            if op.get("x-sdk") is False:  # sdkgen leaves it out (e.g. /_backup's file)
                continue
            params = []
            for p in op.get("parameters", []):
                if "$ref" in p:
                    p = SPEC["components"]["parameters"][ref_name(p)]
                params.append(p)
            body = None
            if "requestBody" in op:
                body = op["requestBody"]["content"]["application/json"]["schema"]
            answer: dict[str, Any] | None = None
            text = False
            for code in ("200", "201", "204"):
                r = op["responses"].get(code)
                if r is None:
                    continue
                content = r.get("content", {})
                if "application/json" in content:
                    answer = content["application/json"]["schema"]
                elif "text/plain" in content:
                    answer, text = {"type": "string"}, True
                break
            assert answer is not None, op["operationId"]
            security = op.get("security", SPEC.get("security", []))
            yield {
                "id": op["operationId"],
                "method": method.upper(),
                "path": path,
                "auth": len(security) > 0,
                "headers": [p for p in params if p["in"] == "header"],
                "body": body,
                "answer": answer,
                "text": text,
            }


def header_names() -> set[str]:
    names = {p["name"] for p in SPEC["components"]["parameters"].values() if p["in"] == "header"}
    for item in SPEC["paths"].values():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            for code, r in op["responses"].items():
                if "$ref" in r:
                    r = SPEC["components"]["responses"][ref_name(r)]
                if str(code).startswith("2"):
                    names |= set(r.get("headers", {}))
    if any(s.get("type") == "http" for s in SPEC["components"]["securitySchemes"].values()):
        names.add("Authorization")
    return names


ERROR_CODES: list[str] = SCHEMAS["Error"]["properties"]["code"]["enum"]
OPERATIONS = list(operations())


# --- each language's mapping of a schema, worked out from openapi.yaml ---

def cs_type(s: dict[str, Any]) -> str:
    k = kind(s)
    if k == "ref":
        return "JsonElement" if raw(s) else type_name(ref_name(s))
    if k in ("any", "union"):
        return "JsonElement"
    if k in ("string", "integer", "number", "boolean"):
        return {"string": "string", "integer": "long", "number": "double", "boolean": "bool"}[k]
    if k == "array":
        return f"IReadOnlyList<{cs_type(s['items'])}>"
    ap = s.get("additionalProperties")
    return f"IReadOnlyDictionary<string,{cs_type(ap) if isinstance(ap, dict) else 'JsonElement'}>"


def swift_type(s: dict[str, Any]) -> str:
    k = kind(s)
    if k == "ref":
        return type_name(ref_name(s))
    if k in ("any", "union"):
        return "JSONValue"
    if k in ("string", "integer", "number", "boolean"):
        return {"string": "String", "integer": "Int64", "number": "Double", "boolean": "Bool"}[k]
    if k == "array":
        return f"[{swift_type(s['items'])}]"
    ap = s.get("additionalProperties")
    return f"[String:{swift_type(ap) if isinstance(ap, dict) else 'JSONValue'}]"


def dart_type(s: dict[str, Any]) -> str:
    k = kind(s)
    if k == "ref":
        return type_name(ref_name(s))
    if k in ("any", "union"):
        return "Object?"
    if k in ("string", "integer", "number", "boolean"):
        return {"string": "String", "integer": "int", "number": "double", "boolean": "bool"}[k]
    if k == "array":
        return f"List<{dart_type(s['items'])}>"
    ap = s.get("additionalProperties")
    return f"Map<String,{dart_type(ap) if isinstance(ap, dict) else 'Object?'}>"


def answer_type(op: dict[str, Any], mapping: Any, text: str) -> str:
    return text if op["text"] else mapping(op["answer"])


# --- parse trees ---------------------------------------------------------

TREES: dict[str, tuple[bytes, tree_sitter.Node]] = {}


def tree(lang: str) -> tuple[bytes, tree_sitter.Node]:
    if lang not in TREES:
        module, path = FILES[lang]
        src = path.read_bytes()
        parser = tree_sitter.Parser(tree_sitter.Language(module.language()))
        TREES[lang] = (src, parser.parse(src).root_node)
    return TREES[lang]


def nodes(n: tree_sitter.Node, type_: str | None = None) -> Iterator[tree_sitter.Node]:
    if type_ is None or n.type == type_:
        yield n
    for c in n.children:
        yield from nodes(c, type_)


def text(n: tree_sitter.Node | None) -> str:
    """A node's source, whitespace removed (so types compare as written)."""
    assert n is not None
    return re.sub(r"\s+", "", n.text.decode())


def string_value(n: tree_sitter.Node) -> str:
    """A string literal's value (none of ours has escapes)."""
    t = n.text.decode()
    assert t[0] in "\"'" and t[-1] == t[0], t
    return t[1:-1]


def route_refs(lang: str, body: tree_sitter.Node) -> list[str]:
    """The names a call's body takes from Routes (Routes.query → query)."""
    out = []
    for n in nodes(body):
        if lang == "csharp" and n.type == "member_access_expression" and text(n.child_by_field_name("expression")) == "Routes":
            out.append(text(n.child_by_field_name("name")))
        elif lang == "swift" and n.type == "navigation_expression" and text(n.child_by_field_name("target")) == "Routes":
            out.append(bare(text(n.child_by_field_name("suffix"))[1:]))
        elif lang == "dart" and n.type == "identifier" and text(n) == "Routes" and n.next_named_sibling is not None:
            out.append(text(n.next_named_sibling).lstrip("."))
    return out


def child(n: tree_sitter.Node, *types: str) -> tree_sitter.Node | None:
    for c in n.named_children:
        if c.type in types:
            return c
    return None


def children(n: tree_sitter.Node, *types: str) -> list[tree_sitter.Node]:
    return [c for c in n.named_children if c.type in types]


@pytest.mark.parametrize("lang", sorted(FILES))
def test_parses_without_error(lang: str) -> None:
    src, root = tree(lang)
    bad = [
        f"{FILES[lang][1].relative_to(ROOT)}:{n.start_point[0] + 1}:{n.start_point[1] + 1}: "
        + (f"MISSING {n.type!r}" if n.is_missing else f"ERROR {n.text.decode()[:60]!r}")
        for n in nodes(root)
        if n.is_error or n.is_missing
    ]
    assert not bad, "\n".join(bad)
    assert not root.has_error


@pytest.mark.parametrize("module,path", BESIDE, ids=[str(p.relative_to(ROOT)) for _, p in BESIDE])
def test_beside_parses(module: Any, path: pathlib.Path) -> None:
    parser = tree_sitter.Parser(tree_sitter.Language(module.language()))
    root = parser.parse(path.read_bytes()).root_node
    bad = [n.start_point for n in nodes(root) if n.is_error or n.is_missing]
    assert not bad, f"{path.relative_to(ROOT)}: ERROR or MISSING at {bad}"


@pytest.mark.parametrize("lang", sorted(FILES))
def test_no_reserved_names(lang: str) -> None:
    _, root = tree(lang)
    bad = []
    for type_, field in DECLARING[lang]:
        for n in nodes(root, type_):
            names = [n.child_by_field_name(field)] if field else [c for c in n.named_children if c.type == "identifier"][:1]
            for id_ in names:
                if id_ is not None and id_.text.decode() in RESERVED[lang]:
                    bad.append(f"{id_.text.decode()!r} at {id_.start_point[0] + 1}:{id_.start_point[1] + 1}")
    assert not bad, f"{lang}: reserved words declared as names: {bad}"


# --- C# ------------------------------------------------------------------

def cs_types() -> dict[str, tree_sitter.Node]:
    _, root = tree("csharp")
    out = {}
    for n in nodes(root):
        if n.type in ("record_declaration", "class_declaration", "enum_declaration"):
            out[text(n.child_by_field_name("name"))] = n
    return out


def cs_members(decl: tree_sitter.Node, type_: str) -> list[tree_sitter.Node]:
    body = decl.child_by_field_name("body")
    assert body is not None
    return children(body, type_)


def cs_modifiers(n: tree_sitter.Node) -> set[str]:
    return {c.text.decode() for c in children(n, "modifier")}


def cs_attributes(n: tree_sitter.Node) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for a in nodes(n, "attribute"):
        if a.parent is not None and a.parent.parent == n:
            out[text(a.child_by_field_name("name"))] = [text(x) for x in nodes(a, "attribute_argument")]
    return out


def test_csharp_models() -> None:
    types = cs_types()
    for name, s in records().items():
        tn = type_name(name)
        assert tn in types and types[tn].type == "record_declaration", f"C#: no record {tn} for schema {name}"
        props = s["properties"]
        required = set(s.get("required", []))
        seen = {}
        for p in cs_members(types[tn], "property_declaration"):
            attrs = cs_attributes(p)
            assert "JsonPropertyName" in attrs, f"C# {tn}.{text(p.child_by_field_name('name'))}: no JsonPropertyName"
            wire = attrs["JsonPropertyName"][0].strip('"')
            seen[wire] = p
        assert set(seen) == set(props), f"C# {tn}: JSON names {sorted(seen)}, openapi.yaml {sorted(props)}"
        for wire, p in seen.items():
            ps = props[wire]
            want = cs_type(ps)
            if wire not in required or (kind(ps) != "ref" and allows_null(ps)):
                want += "?"
            where = f"C# {tn}.{wire}"
            assert text(p.child_by_field_name("type")) == want, f"{where}: type {text(p.child_by_field_name('type'))}, want {want}"
            name_ = pascal(wire) + ("Value" if pascal(wire) == tn else "")
            assert text(p.child_by_field_name("name")) == name_, f"{where}: named {text(p.child_by_field_name('name'))}, want {name_}"
            assert ("required" in cs_modifiers(p)) == (wire in required), f"{where}: required is {wire in required} in openapi.yaml"
            if wire not in required:
                assert "JsonIgnore" in cs_attributes(p), f"{where}: optional, so left out when null"
    for name, s in aliases().items():
        k = kind(s)
        if k in ("any", "union"):
            assert name not in types, f"C#: {name} is raw JSON (JsonElement), not a type"
            continue
        assert name in types and types[name].type == "class_declaration", f"C#: no class {name}"
        base = child(types[name], "base_list")
        want = f"List<{cs_type(s['items'])}>" if k == "array" else f"Dictionary<string,{cs_type(s['additionalProperties'])}>"
        assert base is not None and text(base.named_children[0]) == want, f"C# {name}: base {base and text(base)}, want {want}"


def test_csharp_operations() -> None:
    types = cs_types()
    routes = {
        text(d.child_by_field_name("name")): [text(a) for a in nodes(d, "argument")]
        for d in nodes(types["Routes"], "variable_declarator")
    }
    methods = {text(m.child_by_field_name("name")): m for m in cs_members(types["Transport"], "method_declaration")}
    for op in OPERATIONS:
        name = pascal(op["id"])
        assert routes.get(name) == [f'"{op["method"]}"', f'"{op["path"]}"', str(op["auth"]).lower()], f"C# Routes.{name}: {routes.get(name)}"
        m = methods.get(name + "Async")
        assert m is not None, f"C#: no Transport.{name}Async for {op['id']}"
        assert "public" in cs_modifiers(m)
        want_ret = f"Task<Reply<{answer_type(op, cs_type, 'string')}>>"
        assert text(m.child_by_field_name("returns")) == want_ret, f"C# {name}Async returns {text(m.child_by_field_name('returns'))}, want {want_ret}"
        params = [(text(p.child_by_field_name("type")), text(p.child_by_field_name("name"))) for p in children(m.child_by_field_name("parameters"), "parameter")]
        want = []
        if op["body"] is not None:
            want.append((cs_type(op["body"]), "body"))
        if op["headers"]:
            want.append((f"{name}Headers?", "headers"))
        want.append(("CancellationToken", "cancellationToken"))
        assert params == want, f"C# {name}Async({params}), want {want}"
        assert route_refs("csharp", m.child_by_field_name("body")) == [name], f"C# {name}Async sends {route_refs('csharp', m.child_by_field_name('body'))}"
        sent = []
        for n in nodes(m.child_by_field_name("body"), "implicit_object_creation_expression"):
            args = [a for a in nodes(n, "argument") if a.parent == n.named_children[0]]
            sent.append((string_value(args[0].named_children[0]), text(args[1])))
        want_sent = [(p["name"], f"headers?.{pascal(p['name'])}") for p in op["headers"]]
        assert [(w, v[: len(f)]) for (w, v), (_, f) in zip(sent, want_sent)] == want_sent and len(sent) == len(want_sent), f"C# {name}Async sends headers {sent}"
        if op["headers"]:
            h = types[f"{name}Headers"]
            got = [(text(p.child_by_field_name("type")), text(p.child_by_field_name("name"))) for p in cs_members(h, "property_declaration")]
            assert got == [(cs_type(p["schema"]) + "?", pascal(p["name"])) for p in op["headers"]], f"C# {name}Headers: {got}"
    public = {n for n, m in methods.items() if "public" in cs_modifiers(m)}
    assert public == {pascal(op["id"]) + "Async" for op in OPERATIONS} | {"Dispose", "DisposeAsync"}, sorted(public)


def test_csharp_headers_and_codes() -> None:
    types = cs_types()
    consts = {
        text(d.child_by_field_name("name")): string_value(d.named_children[-1])
        for d in nodes(types["ApiHeaders"], "variable_declarator")
    }
    assert set(consts.values()) == header_names()
    assert all(k == pascal(v) for k, v in consts.items()), consts
    members = [text(m.child_by_field_name("name")) for m in nodes(types["ErrorCode"], "enum_member_declaration")]
    assert members == [pascal(c) for c in ERROR_CODES + CLIENT_CODES]
    # ErrorCodes.Of maps every wire code to its member, and nothing else.
    of = next(m for m in cs_members(types["ErrorCodes"], "method_declaration") if text(m.child_by_field_name("name")) == "Of")
    arms = [(string_value(a.named_children[0].named_children[0]), text(a.named_children[1])) for a in nodes(of, "switch_expression_arm") if a.named_children[0].named_children and a.named_children[0].named_children[0].type == "string_literal"]
    assert arms == [(c, f"ErrorCode.{pascal(c)}") for c in ERROR_CODES + CLIENT_CODES]
    assert string_value(next(nodes(types["Api"], "variable_declarator")).named_children[-1]) == SPEC["info"]["version"]


# --- Swift ---------------------------------------------------------------

def swift_decls() -> dict[str, tree_sitter.Node]:
    _, root = tree("swift")
    out = {}
    for n in root.named_children:
        if n.type in ("class_declaration", "typealias_declaration"):
            out[text(n.child_by_field_name("name"))] = n
    return out


def swift_kind(n: tree_sitter.Node) -> str:
    k = n.child_by_field_name("declaration_kind")
    return k.text.decode() if k is not None else n.type


def swift_props(decl: tree_sitter.Node) -> list[tuple[str, str]]:
    body = decl.child_by_field_name("body")
    assert body is not None
    out = []
    for p in children(body, "property_declaration"):
        ann = child(p, "type_annotation")
        out.append((bare(text(p.child_by_field_name("name"))), text(ann.named_children[0]) if ann else ""))
    return out


def test_swift_models() -> None:
    decls = swift_decls()
    for name, s in records().items():
        tn = type_name(name)
        assert tn in decls and swift_kind(decls[tn]) == "struct", f"Swift: no struct {tn} for schema {name}"
        body = decls[tn].child_by_field_name("body")
        keys = next((c for c in children(body, "class_declaration") if text(c.child_by_field_name("name")) == "CodingKeys"), None)
        assert keys is not None, f"Swift {tn}: no CodingKeys"
        wire_of = {}
        for e in nodes(keys, "enum_entry"):
            case = bare(text(e.child_by_field_name("name")))
            rv = e.child_by_field_name("raw_value")
            wire_of[case] = string_value(rv) if rv is not None else case
        props = dict(swift_props(decls[tn]))
        assert set(wire_of.values()) == set(s["properties"]), f"Swift {tn}: JSON names {sorted(wire_of.values())}"
        assert set(props) == set(wire_of), f"Swift {tn}: properties {sorted(props)}, coding keys {sorted(wire_of)}"
        required = set(s.get("required", []))
        for case, wire in wire_of.items():
            ps = s["properties"][wire]
            want = swift_type(ps)
            if not raw(ps) and (wire not in required or allows_null(ps)):
                want += "?"
            assert case == camel(wire), f"Swift {tn}.{case} for {wire}"
            assert props[case] == want, f"Swift {tn}.{case}: {props[case]}, want {want}"
    for name, s in aliases().items():
        assert name in decls and decls[name].type == "typealias_declaration", f"Swift: no typealias {name}"
        assert text(decls[name].named_children[-1]) == swift_type(s), f"Swift {name} = {text(decls[name].named_children[-1])}"


def swift_return(f: tree_sitter.Node) -> str:
    after = False
    for c in f.children:
        if c.type == "->":
            after = True
        elif after and c.is_named:
            return text(c)
    return ""


def test_swift_operations() -> None:
    decls = swift_decls()
    routes = {}
    for p in nodes(decls["Routes"], "property_declaration"):
        routes[bare(text(p.child_by_field_name("name")))] = [text(a.named_children[-1]) for a in nodes(p, "value_argument")]
    body = decls["Transport"].child_by_field_name("body")
    funcs = {bare(text(f.child_by_field_name("name"))): f for f in children(body, "function_declaration")}
    for op in OPERATIONS:
        name = camel(op["id"])
        assert routes.get(name) == [f'"{op["method"]}"', f'"{op["path"]}"', str(op["auth"]).lower()], f"Swift Routes.{name}: {routes.get(name)}"
        f = funcs.get(name)
        assert f is not None, f"Swift: no Transport.{name}"
        assert {"async", "throws"} <= {c.type for c in f.children}, f"Swift {name}: not async throws"
        want_ret = f"Reply<{answer_type(op, swift_type, 'String')}>"
        assert swift_return(f) == want_ret, f"Swift {name} returns {swift_return(f)}, want {want_ret}"
        params = [[text(x) for x in p.named_children] for p in children(f, "parameter")]
        want = []
        if op["body"] is not None:
            want.append(["_", "body", swift_type(op["body"])])
        if op["headers"]:
            want.append(["headers", f"{pascal(op['id'])}Headers"])
        assert params == want, f"Swift {name}({params}), want {want}"
        fbody = f.child_by_field_name("body")
        assert route_refs("swift", fbody) == [name], f"Swift {name} sends {route_refs('swift', fbody)}"
        sent = [(string_value(t.named_children[0]), text(t.named_children[1])) for t in nodes(fbody, "tuple_expression") if t.named_children and t.named_children[0].type == "line_string_literal"]
        want_sent = [(p["name"], f"headers.{camel(p['name'])}") for p in op["headers"]]
        assert len(sent) == len(want_sent) and all(w == ws and v.startswith(f) for (w, v), (ws, f) in zip(sent, want_sent)), f"Swift {name} sends headers {sent}"
        if op["headers"]:
            got = swift_props(decls[f"{pascal(op['id'])}Headers"])
            assert got == [(camel(p["name"]), swift_type(p["schema"]) + "?") for p in op["headers"]], f"Swift {name} headers: {got}"
    private = {n for n, f in funcs.items() if "private" in text(child(f, "modifiers"))}
    assert set(funcs) - private == {camel(op["id"]) for op in OPERATIONS}


def test_swift_headers_and_codes() -> None:
    decls = swift_decls()
    consts = {bare(text(p.child_by_field_name("name"))): string_value(p.child_by_field_name("value")) for p in nodes(decls["ApiHeaders"], "property_declaration")}
    assert set(consts.values()) == header_names()
    assert all(k == camel(v) for k, v in consts.items()), consts
    codes = [(bare(text(e.child_by_field_name("name"))), string_value(e.child_by_field_name("raw_value"))) for e in nodes(decls["ErrorCode"], "enum_entry")]
    assert codes == [(camel(c), c) for c in ERROR_CODES + CLIENT_CODES]


# --- Dart ----------------------------------------------------------------

def dart_decls() -> dict[str, tree_sitter.Node]:
    _, root = tree("dart")
    out = {}
    for n in root.named_children:
        if n.type in ("class_definition", "enum_declaration"):
            out[text(n.child_by_field_name("name"))] = n
        elif n.type == "type_alias":
            out[text(n.named_children[0])] = n
    return out


def dart_fields(decl: tree_sitter.Node) -> list[tuple[str, str]]:
    """Each `final T name;` of a class: its name and type (the source from
    the first node after `final` to the identifier list)."""
    body = decl.child_by_field_name("body")
    assert body is not None
    out = []
    for d in children(body, "declaration"):
        if child(d, "final_builtin") is None:
            continue
        names = child(d, "initialized_identifier_list")
        assert names is not None
        parts = [c for c in d.named_children if c.type not in ("final_builtin", "initialized_identifier_list")]
        type_ = re.sub(r"\s+", "", d.text[parts[0].start_byte - d.start_byte : parts[-1].end_byte - d.start_byte].decode())
        out += [(text(i), type_) for i in nodes(names, "initialized_identifier")]
    return out


def dart_method(decl: tree_sitter.Node, name: str) -> tuple[tree_sitter.Node, tree_sitter.Node]:
    """A method's signature and the function_body after it."""
    body = decl.child_by_field_name("body")
    assert body is not None
    kids = body.named_children
    for i, k in enumerate(kids):
        if k.type == "method_signature":
            sig = k.named_children[0]
            ids = [text(c) for c in sig.named_children if c.type == "identifier"]
            if name in ids and i + 1 < len(kids) and kids[i + 1].type == "function_body":
                return sig, kids[i + 1]
    raise AssertionError(f"Dart {text(decl.child_by_field_name('name'))}: no method {name}")


def dart_reader(s: dict[str, Any], nullable: bool) -> str:
    """What fromJson must hold to read a value of schema s: the cast of a
    primitive, the fromJson of a record (or of a list's records)."""
    k = kind(s)
    if raw(s):
        return ""
    if k == "ref" and ref_name(s) in records():
        return f"{type_name(ref_name(s))}.fromJson("
    if k == "ref":
        return dart_reader(SCHEMAS[ref_name(s)], nullable)
    if k == "array":
        inner = dart_reader(s["items"], False)
        return inner or ("asList<Object?>" + ("?" if nullable else ""))
    if k in ("string", "integer", "boolean"):
        return "as" + dart_type(s) + ("?" if nullable else "")
    if k == "number":
        return "asnum" + ("?" if nullable else "")
    return "asMap<String,Object?>" + ("?" if nullable else "")


def test_dart_models() -> None:
    decls = dart_decls()
    for name, s in records().items():
        tn = type_name(name)
        assert tn in decls and decls[tn].type == "class_definition", f"Dart: no class {tn} for schema {name}"
        fields = dict(dart_fields(decls[tn]))
        # fromJson: each field read from its JSON name.
        _, from_body = dart_method(decls[tn], "fromJson")
        wire_of = {}
        read = {}
        for a in nodes(from_body, "named_argument"):
            label = text(child(child(a, "label"), "identifier"))
            key = next(nodes(a, "index_selector")).named_children[0]
            wire_of[label] = string_value(key)
            read[label] = a
        assert set(wire_of.values()) == set(s["properties"]), f"Dart {tn}.fromJson reads {sorted(wire_of.values())}"
        assert set(fields) == set(wire_of), f"Dart {tn}: fields {sorted(fields)}, fromJson {sorted(wire_of)}"
        # toJson: each JSON name written from its field.
        _, to_body = dart_method(decls[tn], "toJson")
        written = {string_value(p.child_by_field_name("key")): text(p.child_by_field_name("value")) for p in nodes(to_body, "pair")}
        assert set(written) == set(s["properties"]), f"Dart {tn}.toJson writes {sorted(written)}"
        required = set(s.get("required", []))
        for field, wire in wire_of.items():
            ps = s["properties"][wire]
            want = dart_type(ps)
            if not raw(ps) and (wire not in required or allows_null(ps)):
                want += "?"
            assert field == camel(wire), f"Dart {tn}.{field} for {wire}"
            assert fields[field] == want, f"Dart {tn}.{field}: {fields[field]}, want {want}"
            assert written[wire] == field, f"Dart {tn}.toJson writes {wire} from {written[wire]}"
            reader = dart_reader(ps, wire not in required or allows_null(ps))
            if reader:
                assert reader in text(read[field]), f"Dart {tn}.fromJson reads {wire} as {text(read[field])}, want {reader}"
    for name, s in aliases().items():
        assert name in decls and decls[name].type == "type_alias", f"Dart: no typedef {name}"
        d = decls[name]
        got = re.sub(r"\s+", "", d.text[d.named_children[1].start_byte - d.start_byte : d.named_children[-1].end_byte - d.start_byte].decode())
        assert got == dart_type(s), f"Dart {name} = {got}, want {dart_type(s)}"


def test_dart_operations() -> None:
    decls = dart_decls()
    routes = {}
    for d in nodes(decls["Routes"], "static_final_declaration"):
        routes[text(d.named_children[0])] = [text(a) for a in nodes(d, "argument")]
    body = decls["Transport"].child_by_field_name("body")
    public = set()
    for sig in children(body, "method_signature"):
        f = sig.named_children[0]
        if f.type == "function_signature":
            n = text(f.child_by_field_name("name"))
            if not n.startswith("_"):
                public.add(n)
    for op in OPERATIONS:
        name = camel(op["id"])
        assert routes.get(name) == [f'"{op["method"]}"', f'"{op["path"]}"', str(op["auth"]).lower()], f"Dart Routes.{name}: {routes.get(name)}"
        sig, mbody = dart_method(decls["Transport"], name)
        assert route_refs("dart", mbody) == [name], f"Dart {name} sends {route_refs('dart', mbody)}"
        sent = [(string_value(p.child_by_field_name("key")), "".join(text(v) for v in p.children_by_field_name("value"))) for p in nodes(mbody, "pair")]
        want_sent = [(p["name"], f"headers.{camel(p['name'])}") for p in op["headers"]]
        assert len(sent) == len(want_sent) and all(w == ws and v.startswith(f) for (w, v), (ws, f) in zip(sent, want_sent)), f"Dart {name} sends headers {sent}"
        params = child(sig, "formal_parameter_list")
        ret = sig.text[: params.start_byte - sig.start_byte].decode().rsplit(name, 1)[0]
        want_ret = f"Future<Reply<{answer_type(op, dart_type, 'String')}>>"
        assert re.sub(r"\s+", "", ret) == want_ret, f"Dart {name} returns {ret}, want {want_ret}"
        positional = [text(p) for p in children(params, "formal_parameter")]
        named = [text(p) for p in nodes(child(params, "optional_formal_parameters"), "formal_parameter")]
        assert positional == ([f"{dart_type(op['body'])}body"] if op["body"] is not None else []), f"Dart {name}({positional})"
        want_named = ([f"{pascal(op['id'])}Headersheaders"] if op["headers"] else []) + ["Future<void>?abortTrigger"]
        assert named == want_named, f"Dart {name}({{{named}}}), want {want_named}"
        if op["headers"]:
            got = dart_fields(decls[f"{pascal(op['id'])}Headers"])
            assert got == [(camel(p["name"]), dart_type(p["schema"]) + "?") for p in op["headers"]], f"Dart {name} headers: {got}"
    assert public == {camel(op["id"]) for op in OPERATIONS} | {"close"}, sorted(public)


def test_dart_headers_and_codes() -> None:
    decls = dart_decls()
    consts = {text(d.named_children[0]): string_value(d.named_children[-1]) for d in nodes(decls["ApiHeaders"], "static_final_declaration")}
    assert set(consts.values()) == header_names()
    assert all(k == camel(v) for k, v in consts.items()), consts
    codes = [(text(c.child_by_field_name("name")), string_value(next(nodes(c, "string_literal")))) for c in nodes(decls["ErrorCode"], "enum_constant")]
    assert codes == [(camel(c), c) for c in ERROR_CODES + CLIENT_CODES]
