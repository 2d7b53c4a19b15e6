# SPDX-License-Identifier: Apache-2.0
"""docs/kctrld.schema.json (the JSON Schema editors use through
yaml-language-server) says what the parser accepts:

- the keys of every mapping the parser reads (its key tables in
  daemon/config/*.c: `struct field` tables, the key lists handed to
  cfg_check_keys, the kind-reference keys and their extras, the hook
  permission keys) are exactly the `properties` of the schema object at
  that place; a key table this test does not know fails it, so a new
  section cannot be added without the schema;
- every shipped config (config/ and deploy/ configs) and every whole
  config in README.md and docs/*.md validates against the schema
  (python3-jsonschema; skipped without it);
- the shipped configs carry the `# yaml-language-server: $schema=` line,
  naming the schema where it is: relative to the file in the source tree,
  /usr/share/kctrld/kctrld.schema.json for the /etc conffile (the
  packaged copy; `make install` rewrites it to its PREFIX).
Prints TAP.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402
from test_docs_snippets import blocks  # noqa: E402

ROOT = taplib.ROOT
SCHEMA_PATH = os.path.join(ROOT, "docs", "kctrld.schema.json")
INSTALLED_SCHEMA = "/usr/share/kctrld/kctrld.schema.json"
CONFIG_DIR = os.path.join(ROOT, "daemon", "config")
# Shipped kctrld configs (config/ also holds Kubernetes objects for the demo).
SHIPPED = ["config/demo.yaml", "config/kctrld.example.yaml", "deploy/base/kctrld.yaml"]

# (function, table) -> the schema places ("a.b[]" = items of b) whose keys
# the table lists. parse_kind_ref's table `t` is the base of every kind
# reference; its callers' `extra` tables add to it.
KIND_REF = ("parse_kind_ref", "t")
TABLES = {
    ("parse_root", "table"): [""],
    ("parse_leader_election", "table"): ["leaderElection"],
    ("parse_metrics", "table"): ["metrics"],
    ("cfg_parse_informer", "table"): ["informers[]"],
    ("cfg_parse_informer", "tkeys"): ["informers[].transform"],
    ("cfg_parse_sharding", "table"): ["sharding", "controllers[].sharding"],
    ("cfg_parse_controller", "table"): ["controllers[]"],
    ("cfg_parse_controller", "rl_table"): ["controllers[].rateLimit"],
    KIND_REF: ["controllers[].for"],
    ("parse_owns", "extra"): ["controllers[].owns[]"],
    ("parse_watch", "extra"): ["controllers[].watches[]"],
    ("parse_watch", "mkeys"): ["controllers[].watches[].mapping"],
    ("cfg_parse_hook", "table"): ["controllers[].hook"],
    ("parse_hook_exec", "table"): ["controllers[].hook.exec"],
    ("parse_hook_webhook", "table"): ["controllers[].hook.webhook"],
    ("parse_hook_permissions", "strcmp"): ["controllers[].hook.permissions[]"],
}
# Places whose keys are the user's (names of indexes, environment
# variables, plugin settings): no key table.
FREE = {"informers[].indexes", "controllers[].hook.exec.env", "controllers[].settings"}


def functions(text):
    """{name: body} of the top-level function definitions of a C file."""
    out = {}
    for m in re.finditer(r"(?m)^[A-Za-z][^\n;]*?\b(\w+)\([^;{]*?\)\s*\{\n(.*?)^\}", text, re.S):
        out[m.group(1)] = m.group(2)
    return out


def parser_tables():
    """{(function, table): [keys]} of every key table in daemon/config/."""
    tables = {}
    for f in sorted(os.listdir(CONFIG_DIR)):
        if not f.endswith(".c"):
            continue
        with open(os.path.join(CONFIG_DIR, f)) as fh:
            text = fh.read()
        for fn, body in functions(text).items():
            for m in re.finditer(r"struct field (\w+)\[\d*\]\s*=\s*\{(.*?)\};", body, re.S):
                keys = re.findall(r'(?:FIELD|FIELD_RANGE|REQUIRED|CUSTOM)\(\s*"([^"]+)"', m.group(2))
                keys += re.findall(r'\.key\s*=\s*"([^"]+)"', m.group(2))
                tables[(fn, m.group(1))] = keys
            for m in re.finditer(r"static const char \*const (\w+)\[\]\s*=\s*\{(.*?)\};", body, re.S):
                if re.search(r"\bcfg_check_keys\([^;]*\b%s\b" % m.group(1), body):
                    tables[(fn, m.group(1))] = re.findall(r'"([^"]+)"', m.group(2))
            keys = re.findall(r'strcmp\(key, "([^"]+)"\)', body)
            if keys:
                tables[(fn, "strcmp")] = keys
    return tables


def schema_at(schema, place):
    node = schema
    for part in [p for p in place.split(".") if p]:
        items = part.endswith("[]")
        node = node["properties"][part[:-2] if items else part]
        if items:
            node = node["items"]
    return node


def object_places(node, place=""):
    """Every place of the schema that is an object with properties."""
    out = []
    if "properties" in node:
        out.append(place)
        for k, v in node["properties"].items():
            sub = "%s.%s" % (place, k) if place else k
            if v.get("type") == "array" and isinstance(v.get("items"), dict):
                out += object_places(v["items"], sub + "[]")
            else:
                out += object_places(v, sub)
    return out


def load_schema():
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def test_schema_keys_are_the_parsers():
    schema = load_schema()
    tables = parser_tables()
    unknown = sorted(set(tables) - set(TABLES))
    assert not unknown, "key tables this test does not map to the schema: %s" % unknown
    missing = sorted(set(TABLES) - set(tables))
    assert not missing, "key tables not found in daemon/config/ (renamed?): %s" % missing
    want = {}
    for key, places in TABLES.items():
        keys = set(tables[key])
        if key[0] in ("parse_owns", "parse_watch") and key[1] == "extra":
            keys |= set(tables[KIND_REF])
        for p in places:
            want[p] = keys
    bad = []
    for place, keys in sorted(want.items()):
        props = set(schema_at(schema, place)["properties"])
        if props != keys:
            bad.append("%s: parser %s, schema %s" % (place or "(top)", sorted(keys), sorted(props)))
    assert not bad, "\n".join(bad)
    extra = sorted(set(object_places(schema)) - set(want) - FREE)
    assert not extra, "schema objects the parser has no table for: %s" % extra
    # Closed objects, so that a misspelt key is flagged by the editor too.
    for place in want:
        assert schema_at(schema, place).get("additionalProperties") is False, place


def configs():
    """(where, parsed YAML) of every shipped config and docs config."""
    import yaml
    out = []
    for rel in SHIPPED:
        with open(os.path.join(ROOT, rel)) as f:
            out.append((rel, yaml.safe_load(f)))
    props = set(load_schema()["properties"])
    for f, line, text in blocks("yaml"):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            continue  # test_docs_snippets reports it
        if isinstance(doc, dict) and doc and set(doc) <= props and \
                ("informers" in doc or "controllers" in doc):
            out.append(("%s:%d" % (os.path.relpath(f, ROOT), line), doc))
    return out


def test_configs_validate():
    try:
        import jsonschema
        import yaml  # noqa: F401
    except ImportError:
        raise taplib.Skip("python3-jsonschema or python3-yaml not installed")
    validator = jsonschema.Draft7Validator(load_schema())
    found = configs()
    assert len(found) > len(SHIPPED), "no docs config found"
    bad = []
    for where, doc in found:
        for e in validator.iter_errors(doc):
            bad.append("%s: %s: %s" % (where, "/".join(str(p) for p in e.absolute_path), e.message))
    assert not bad, "\n".join(bad)
    # And it refuses what the parser refuses.
    wrong = {"informers": [{"apiVersion": "v1", "kind": "Pod", "labelSelectr": "a=b"}]}
    assert list(validator.iter_errors(wrong)), "an unknown key passes the schema"


def test_shipped_configs_name_the_schema():
    bad = []
    for rel in SHIPPED:
        with open(os.path.join(ROOT, rel)) as f:
            head = f.read(2000)
        m = re.search(r"(?m)^# yaml-language-server: \$schema=(\S+)$", head)
        if not m:
            bad.append("%s: no yaml-language-server $schema line" % rel)
            continue
        target = m.group(1)
        if target == INSTALLED_SCHEMA:
            continue
        path = os.path.normpath(os.path.join(ROOT, os.path.dirname(rel), target))
        if path != SCHEMA_PATH:
            bad.append("%s: $schema=%s is neither %s nor docs/kctrld.schema.json" %
                       (rel, target, INSTALLED_SCHEMA))
    assert not bad, "\n".join(bad)


if __name__ == "__main__":
    taplib.run_tests(globals())
