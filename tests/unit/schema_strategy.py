"""Hypothesis strategies that draw documents from ccbench's JSON Schemas.

hypothesis-jsonschema would be the library for this, but its latest release (0.23.1)
fails inside the hypothesis versions installed here ('many' object has no attribute
'more'), so this covers what ccbench's schemas use: type, enum, bounds, pattern,
minLength, properties/required/additionalProperties/propertyNames, items/minItems,
anyOf/oneOf
(a branch each), local $ref. Optional keys are left out at random, so the defaults are
exercised too; `not` is ignored (the refusal it states is what the tests look for).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

NAME = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)


def from_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    root = root or schema
    if "$ref" in schema:
        node: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        return from_schema(node, root)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches and all("type" in b or "enum" in b or "$ref" in b for b in branches):
        return st.one_of(*(from_schema(b, root) for b in branches))
    kind = schema.get("type")
    if isinstance(kind, list):  # e.g. [string, object]: the keywords of each type apply
        return st.one_of(*(from_schema({**schema, "type": k}, root) for k in kind))
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -5), schema.get("maximum", 10**6))
    if kind == "number":
        return st.floats(
            min_value=schema.get("minimum", schema.get("exclusiveMinimum", -1e6)),
            max_value=schema.get("maximum", 1e6),
            exclude_min="exclusiveMinimum" in schema,
            allow_nan=False,
        )
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"].replace("$", r"\Z"), fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=10)
    if kind == "array":
        items = from_schema(schema.get("items", {"type": "integer"}), root)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=3)
    if kind == "object":
        return _object(schema, root)
    return st.none()


def _object(schema: dict[str, Any], root: dict[str, Any]) -> Any:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    extra = schema.get("additionalProperties")
    keyed = st.fixed_dictionaries(
        {k: from_schema(v, root) for k, v in props.items() if k in required},
        optional={k: from_schema(v, root) for k, v in props.items() if k not in required},
    )
    if not isinstance(extra, dict):
        return keyed
    names = schema.get("propertyNames", {}).get("pattern")
    key = st.from_regex(names.replace("$", r"\Z"), fullmatch=True) if names else NAME
    more = st.dictionaries(key, from_schema(extra, root), min_size=schema.get("minProperties", 0),
                           max_size=2)  # fmt: skip
    return st.tuples(keyed, more).map(lambda kv: {**kv[1], **kv[0]})
