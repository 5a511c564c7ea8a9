"""Render an OpenAPI 3 document into the documentation.

    .. openapi:: ../../dtn_migrate/api/openapi.yaml

(path relative to the page, or absolute from the source directory with a
leading ``/``) writes the reference as os-api-ref lays one out: a
section per tag of the document (versions, migrations, ...), and in it,
for every operation in the order of the document, a section titled with
its summary, then its method and URL, its normal and error response
codes, its request (parameters, and the fields of its body's schema,
flattened, with its example) and its response (fields and example of
each success; what each error means).  Schemas under ``components`` are
followed through ``$ref`` and get a table each, at the end.  The page
is rebuilt when the document changes.
"""

import json
import os

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.parsers.rst import directives
from docutils import statemachine
from sphinx.util import logging
from sphinx.util import nodes as sphinx_nodes
import yaml

LOG = logging.getLogger(__name__)

SCHEMAS = "#/components/schemas/"
METHODS = ("get", "put", "post", "patch", "delete", "head", "options")
#: How deep nested objects are flattened (guards against cycles).
MAX_DEPTH = 6


class Spec(object):
    """An OpenAPI document, with ``$ref`` resolution inside it."""

    def __init__(self, doc):
        self.doc = doc

    def resolve(self, obj):
        seen = set()
        while isinstance(obj, dict) and "$ref" in obj:
            ref = obj["$ref"]
            if ref in seen or not ref.startswith("#/"):
                break
            seen.add(ref)
            target = self.doc
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target[part]
            obj = target
        return obj


def _escape(text):
    return str(text).replace("|", "\\|")


def _one_line(text):
    return " ".join(str(text or "").split())


def _ref_name(schema):
    """The component name of a ``#/components/schemas/X`` reference."""
    ref = (schema or {}).get("$ref", "") if isinstance(schema, dict) else ""
    if ref.startswith(SCHEMAS):
        return ref[len(SCHEMAS):]
    return None


def _label(name):
    return "openapi-schema-%s" % name.lower()


def type_text(spec, schema):
    """A short type description: string (uuid), integer 1..1000, ...;
    a component schema as a link to its table.
    """
    name = _ref_name(schema)
    if name:
        return ":ref:`%s <%s>`" % (name, _label(name))
    schema = spec.resolve(schema or {})
    for key, sep in (("oneOf", " or "), ("anyOf", " or ")):
        if key in schema:
            return sep.join(type_text(spec, s) for s in schema[key])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        kind = "array of %s" % type_text(spec, schema.get("items", {}))
    extras = []
    if "format" in schema:
        extras.append(schema["format"])
    if "enum" in schema:
        extras.append("one of: %s" % ", ".join(
            json.dumps(v) for v in schema["enum"]))
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        extras.append("%s..%s" % ("" if low is None else low,
                                  "" if high is None else high))
    low, high = schema.get("minItems"), schema.get("maxItems")
    if low is not None or high is not None:
        extras.append("%s..%s items" % ("" if low is None else low,
                                        "" if high is None else high))
    if schema.get("nullable"):
        extras.append("nullable")
    if "default" in schema:
        extras.append("default %s" % json.dumps(schema["default"]))
    return kind + (" (%s)" % "; ".join(extras) if extras else "")


def flatten(spec, schema, prefix="", depth=0):
    """[(field, type, required, description)] of an object schema, nested
    objects as ``a.b``, arrays of objects as ``a[].b``.
    """
    schema = spec.resolve(schema or {})
    rows = []
    if depth > MAX_DEPTH:
        return rows
    if (schema.get("type") == "array" and not prefix and
            not _ref_name(schema.get("items"))):
        return flatten(spec, schema.get("items"), "[]", depth + 1)
    for part in schema.get("allOf", ()):
        rows.extend(flatten(spec, part, prefix, depth + 1))
    required = set(schema.get("required", ()))
    for name, sub in (schema.get("properties") or {}).items():
        field = "%s.%s" % (prefix, name) if prefix else name
        rows.append((field, type_text(spec, sub), name in required,
                     _one_line(spec.resolve(sub).get("description"))))
        if _ref_name(sub):
            continue    # a component: its own table
        items = sub.get("items", {})
        if sub.get("type") == "object" or "properties" in sub:
            rows.extend(flatten(spec, sub, field, depth + 1))
        elif (sub.get("type") == "array" and not _ref_name(items) and
              "properties" in spec.resolve(items)):
            rows.extend(flatten(spec, items, field + "[]", depth + 1))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        field = "%s.<key>" % prefix if prefix else "<key>"
        rows.append((field, type_text(spec, extra), False,
                     _one_line(spec.resolve(extra).get("description"))))
    return rows


def _table(header, rows, widths):
    lines = [".. list-table::", "   :header-rows: 1",
             "   :widths: %s" % " ".join(str(w) for w in widths), ""]
    for row in [header] + rows:
        first = True
        for cell in row:
            lead = "   * - " if first else "     - "
            lines.append(lead + (_escape(cell) if cell != "" else "\\"))
            first = False
    lines.append("")
    return lines


def _fields(spec, schema, top=True, label="Body"):
    """The fields of a body's schema as a table, or one line naming the
    component schema (with a link to its table) that it is.
    """
    if top and (_ref_name(schema) or _ref_name(
            spec.resolve(schema or {}).get("items"))):
        return ["%s: %s." % (label, type_text(spec, schema)), ""]
    rows = flatten(spec, schema)
    if not rows:
        return ["%s: %s." % (label, type_text(spec, schema)), ""]
    head = [] if label == "Body" else ["%s:" % label, ""]
    return head + _table(
        ("Field", "Type", "Required", "Description"),
        [("``%s``" % r[0], r[1], "yes" if r[2] else "no", r[3])
         for r in rows], (20, 25, 10, 45))


def _example(media):
    example = media.get("example")
    if example is None and media.get("examples"):
        first = next(iter(media["examples"].values()))
        example = first.get("value")
    if example is None:
        return []
    body = json.dumps(example, indent=2, sort_keys=False)
    return ["Example:", "", ".. code-block:: json", ""] + [
        "   " + line for line in body.splitlines()] + [""]


def _json_media(spec, container):
    content = spec.resolve(container).get("content") or {}
    for kind, media in content.items():
        if "json" in kind:
            return media
    return None


def _title(text, char):
    return [text, char * len(text), ""]


def _heading(summary, method, path):
    """An operation's title: its summary without the final stop."""
    return (_one_line(summary).rstrip(".") or
            "%s %s" % (method.upper(), path))


def _operations(doc, spec):
    """[(tag, [(method, path, shared parameters, operation)])] in the
    order of the document's tags, then of its paths.
    """
    order = [t.get("name") for t in doc.get("tags") or () if t.get("name")]
    groups = {}
    for path, item in (doc.get("paths") or {}).items():
        item = spec.resolve(item)
        shared = item.get("parameters", [])
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            tag = (op.get("tags") or ["other"])[0]
            if tag not in order:
                order.append(tag)
            groups.setdefault(tag, []).append((method, path, shared, op))
    return [(tag, groups[tag]) for tag in order if tag in groups]


def _codes(responses, normal):
    codes = [str(c) for c in responses
             if (str(c)[:1] in ("1", "2", "3")) == normal]
    return ", ".join(codes)


def _operation(spec, method, path, shared, op):
    """One operation, as os-api-ref lays it out: title, method and URL,
    response codes, request (parameters, body, example), response
    (fields, example).
    """
    lines = _title(_heading(op.get("summary"), method, path), "-")
    lines += [".. rst-class:: openapi-method", "",
              "**%s** ``%s``" % (method.upper(), path), ""]
    if op.get("description"):
        lines += op["description"].strip().splitlines() + [""]
    responses = {str(k): spec.resolve(v)
                 for k, v in (op.get("responses") or {}).items()}
    normal = _codes(responses, True)
    errors = _codes(responses, False)
    if normal:
        lines += ["Normal response codes: %s" % normal, ""]
    if errors:
        lines += ["Error response codes: %s" % errors, ""]
    params = [spec.resolve(p) for p in shared + op.get("parameters", [])]
    body = op.get("requestBody")
    if params or body:
        lines += _title("Request", "~")
    if params:
        lines += _table(
            ("Name", "In", "Type", "Required", "Description"),
            [("``%s``" % p.get("name"), p.get("in"),
              type_text(spec, p.get("schema")),
              "yes" if p.get("required") else "no",
              _one_line(p.get("description"))) for p in params],
            (15, 8, 25, 10, 42))
    if body:
        media = _json_media(spec, body)
        label = "Body (%s)" % ("required" if spec.resolve(body).get(
            "required") else "optional")
        if media is not None:
            lines += _fields(spec, media.get("schema", {}), label=label)
            lines += _example(media)
        else:
            lines += [label + ".", ""]
    ok = [(code, r) for code, r in responses.items()
          if code[:1] in ("1", "2", "3")]
    if ok:
        lines += _title("Response", "~")
    for code, response in ok:
        lines += ["``%s``: %s" % (code, _one_line(
            response.get("description"))), ""]
        media = _json_media(spec, response)
        if media is not None and media.get("schema"):
            lines += _fields(spec, media["schema"])
            lines += _example(media)
    failed = [(code, r) for code, r in responses.items()
              if code[:1] not in ("1", "2", "3")]
    if failed:
        lines += _table(("Error", "When"),
                        [("``%s``" % code, _one_line(r.get("description")))
                         for code, r in failed], (15, 85))
    return lines


def render(doc):
    """The reStructuredText of an OpenAPI document, as lines."""
    spec = Spec(doc)
    info = doc.get("info", {})
    lines = []
    if info.get("description"):
        lines += info["description"].strip().splitlines() + [""]
    if info.get("version"):
        lines += ["Document version: ``%s`` (OpenAPI %s)." % (
            info["version"], doc.get("openapi", "3")), ""]
    tags = {t.get("name"): t for t in doc.get("tags") or ()}
    for tag, operations in _operations(doc, spec):
        lines += _title(tag.capitalize(), "=")
        description = (tags.get(tag) or {}).get("description")
        if description:
            lines += description.strip().splitlines() + [""]
        for method, path, shared, op in operations:
            lines += _operation(spec, method, path, shared, op)
    schemas = (doc.get("components") or {}).get("schemas") or {}
    if schemas:
        lines += _title("Schemas", "=")
        lines += ["The objects the operations above refer to.", ""]
        for name, schema in schemas.items():
            lines += [".. _%s:" % _label(name), ""]
            lines += _title(name, "-")
            description = spec.resolve(schema).get("description")
            if description:
                lines += description.strip().splitlines() + [""]
            lines += _fields(spec, schema, top=False)
    return lines


class OpenAPIDirective(Directive):
    required_arguments = 1
    has_content = False
    option_spec = {"encoding": directives.encoding}

    def run(self):
        env = self.state.document.settings.env
        rel, path = env.relfn2path(self.arguments[0])
        env.note_dependency(rel)
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as e:
            raise self.error("cannot read the OpenAPI document %s: %s"
                             % (path, e))
        if not isinstance(doc, dict) or "paths" not in doc:
            raise self.error("%s is not an OpenAPI document (no paths)"
                             % path)
        source = os.path.relpath(path, env.srcdir)
        content = statemachine.StringList(render(doc), source=source)
        container = nodes.section()
        container.document = self.state.document
        sphinx_nodes.nested_parse_with_titles(self.state, content,
                                              container)
        return container.children


def setup(app):
    app.add_directive("openapi", OpenAPIDirective)
    return {"version": "1.0", "parallel_read_safe": True,
            "parallel_write_safe": True}
