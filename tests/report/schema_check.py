"""A small JSON Schema checker (the draft-07 keywords docs/report-format.schema.json uses), without external
packages: type, const, enum, required, properties, additionalProperties, items, minItems, maxItems, minimum,
maximum, pattern, oneOf and local $ref. check(instance, schema) returns a list of errors (empty: valid)."""
import re


def _resolve(root, ref):
    if not ref.startswith("#/"):
        raise ValueError("only local $ref: " + ref)
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _type_ok(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }[name]


KNOWN = {"$schema", "title", "description", "definitions", "$ref", "type", "const", "enum", "required",
         "properties", "additionalProperties", "items", "minItems", "maxItems", "minimum", "maximum", "pattern",
         "oneOf"}


def _check(value, schema, root, path, errors):
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError("schema keyword(s) this checker does not know: %s" % sorted(unknown))
    if "$ref" in schema:
        _check(value, _resolve(root, schema["$ref"]), root, path, errors)
        return
    if "oneOf" in schema:
        passing = [s for s in schema["oneOf"] if not _sub(value, s, root, path)]
        if len(passing) != 1:
            errors.append("%s: matches %d of the oneOf schemas, not 1" % (path, len(passing)))
        return
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, n) for n in names):
            errors.append("%s: %r is not of type %s" % (path, value, "/".join(names)))
            return
    if "const" in schema and value != schema["const"]:
        errors.append("%s: %r is not %r" % (path, value, schema["const"]))
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r is not one of %r" % (path, value, schema["enum"]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append("%s: %r < minimum %r" % (path, value, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append("%s: %r > maximum %r" % (path, value, schema["maximum"]))
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append("%s: %s missing" % (path, key))
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _check(item, props[key], root, path + "." + key, errors)
            elif extra is False:
                errors.append("%s: unexpected property %s" % (path, key))
            elif isinstance(extra, dict):
                _check(item, extra, root, path + "." + key, errors)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append("%s: fewer than %d items" % (path, schema["minItems"]))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append("%s: more than %d items" % (path, schema["maxItems"]))
        if "items" in schema:
            for i, item in enumerate(value):
                _check(item, schema["items"], root, "%s[%d]" % (path, i), errors)


def _sub(value, schema, root, path):
    errors = []
    _check(value, schema, root, path, errors)
    return errors


def check(instance, schema):
    errors = []
    _check(instance, schema, schema, "$", errors)
    return errors
