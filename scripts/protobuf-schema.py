#!/usr/bin/env python3
"""Writes crates/backflow-server/src/protobuf/schema.txt: the shape of every built-in Kubernetes
type as its protobuf wire format and its JSON form describe it, for the server's descriptor-driven
protobuf decoder.

    scripts/protobuf-schema.py API_CHECKOUT APIMACHINERY_CHECKOUT > crates/backflow-server/src/protobuf/schema.txt

API_CHECKOUT is a checkout of https://github.com/kubernetes/api and APIMACHINERY_CHECKOUT one of
https://github.com/kubernetes/apimachinery. Two sources are read, because neither says everything:

- each group version's `generated.proto`: messages, field numbers, wire types, maps, lists;
- the Go types the protos were generated from (`types.go` and its neighbours), whose struct tags
  say what JSON makes of each field: its JSON name, whether it is inlined into the parent
  (`json:",inline"`), and whether a zero value is a value (a pointer, or a field without
  `omitempty`) or means "unset" (the generated marshaller writes every non-pointer field, so a
  zero on the wire is indistinguishable from an absent field otherwise).

Output: a `G <group> <version> <package>` line per group version served (`-` is the core group),
and one block per message:

    M <full message name> [list]
    <number> <json name> <o|r|m> <type> [<map value type>] [inline] [zero]

`list` marks a message that is a list in JSON (`type ExtraValue []string` is `message ExtraValue
{ repeated string items = 1; }` on the wire). Types are scalar names (string, bytes, bool, int32,
int64, double) or full message names.
"""

import os
import re
import sys

PROTO_MESSAGE = re.compile(r"^message (\w+) \{$")
PROTO_FIELD = re.compile(
    r"^\s+(optional|repeated|required) ([\w.]+) (\w+) = (\d+);"
)
PROTO_MAP = re.compile(r"^\s+map<(\w+), ([\w.]+)> (\w+) = (\d+);")
GO_STRUCT = re.compile(r"^type (\w+) struct \{")
GO_FIELD = re.compile(r"^\t(\S+)(?: (\S+))? `([^`]*)`")
GO_TAG = re.compile(r'(\w+):"([^"]*)"')
SCALARS = {"string", "bytes", "bool", "int32", "int64", "double"}


def go_fields(directory):
    """(struct, proto number) -> (json name, inline, zero is a value), from every Go file."""
    out = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".go") or name.endswith("_test.go"):
            continue
        struct = None
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            for line in f:
                m = GO_STRUCT.match(line)
                if m:
                    struct = m.group(1)
                    continue
                if line.startswith("}"):
                    struct = None
                    continue
                m = GO_FIELD.match(line)
                if not struct or not m:
                    continue
                go_type = m.group(2) or m.group(1)
                tags = dict(GO_TAG.findall(m.group(3)))
                if "protobuf" not in tags or "json" not in tags:
                    continue
                number = int(tags["protobuf"].split(",")[1])
                json_parts = tags["json"].split(",")
                # An embedded struct without a JSON name is inlined, as `,inline` says.
                embedded = m.group(2) is None
                inline = json_parts[0] == "" and (embedded or "inline" in json_parts[1:])
                omitted = "omitempty" in json_parts[1:] or "omitzero" in json_parts[1:]
                zero = go_type.startswith("*") or not omitted
                out[(struct, number)] = (json_parts[0], inline, zero)
    return out


def qualify(type_name, package):
    if type_name in SCALARS:
        return type_name
    if type_name.startswith("."):
        return type_name[1:]
    return f"{package}.{type_name}"


def group_of(directory):
    """The API group a group version folder serves: its `+groupName=` (empty for the core
    group), or the folder's name (apps, batch, autoscaling, policy, extensions)."""
    doc = os.path.join(directory, "doc.go")
    if os.path.exists(doc):
        with open(doc, encoding="utf-8") as f:
            m = re.search(r"^// \+groupName=(\S*)$", f.read(), re.M)
            if m:
                return m.group(1)
    return os.path.basename(os.path.dirname(directory))


def proto_file(path, go):
    """The package of one generated.proto and its messages, joined with what the Go types say of
    each field."""
    package = None
    messages = []
    current = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("package "):
                package = line.split()[1].rstrip(";")
                continue
            m = PROTO_MESSAGE.match(line)
            if m:
                current = (m.group(1), [])
                messages.append(current)
                continue
            if line.startswith("}"):
                current = None
                continue
            if current is None:
                continue
            m = PROTO_MAP.match(line)
            if m:
                key, value, name, number = m.groups()
                if key != "string":
                    sys.exit(f"{path}: map key {key} is not a string")
                field = [number, name, "m", qualify(value, package)]
            else:
                m = PROTO_FIELD.match(line)
                if not m:
                    continue
                label, type_name, name, number = m.groups()
                field = [number, name, "r" if label == "repeated" else "o", qualify(type_name, package)]
            json_name, inline, zero = go.get((current[0], int(number)), (field[1], False, False))
            field[1] = json_name or field[1]
            if inline:
                field.append("inline")
            if zero:
                field.append("zero")
            current[1].append(field)
    lines = []
    for name, fields in messages:
        is_list = (
            len(fields) == 1
            and fields[0][0] == "1"
            and fields[0][1] == "items"
            and fields[0][2] == "r"
            and not any(struct == name for struct, _ in go)
        )
        lines.append(f"M {package}.{name}" + (" list" if is_list else ""))
        lines.extend(" ".join(f) for f in fields)
    return package, lines


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    api, machinery = sys.argv[1], sys.argv[2]
    dirs = []
    for root, _, files in os.walk(api):
        if "generated.proto" in files and "/." not in root:
            dirs.append(root)
    for sub in ["pkg/apis/meta/v1", "pkg/runtime", "pkg/util/intstr", "pkg/api/resource"]:
        dirs.append(os.path.join(machinery, sub))
    print("# Generated by scripts/protobuf-schema.py from kubernetes/api and kubernetes/apimachinery; do not edit.")
    for d in sorted(dirs):
        package, lines = proto_file(os.path.join(d, "generated.proto"), go_fields(d))
        if d.startswith(api):
            # The group and version whose objects this package's messages are.
            print(f"G {group_of(d) or '-'} {os.path.basename(d)} {package}")
        print("\n".join(lines))


main()
