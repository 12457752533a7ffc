#!/usr/bin/env python3
"""Extract the Go facts the protobuf codec needs from Kubernetes Go API sources.

For every Go struct that has protobuf tags, prints one line:

    <proto package>.<Struct> <tag>:<jsonName><flags> ...

flags: `*` the Go field is a pointer (a zero value on the wire is meaningful),
       `!` the JSON tag has no `omitempty` (Go always writes the field),
       `^` the field is inlined into its parent (`json:",inline"`),
       `~` the JSON tag has `omitzero`.

Usage: extract.py TAG API_GIT APIMACHINERY_GIT APIEXTENSIONS_GIT > gofacts-<version>.txt
where TAG is a tag such as kubernetes-1.35.0 and the three arguments are git directories (clones
or bare mirrors) of kubernetes/api, kubernetes/apimachinery and kubernetes/apiextensions-apiserver.
"""
import os
import re
import subprocess
import sys

PREFIXES = ["api", "apimachinery", "apiextensions_apiserver"]
SKIP_SUFFIXES = ("_test.go", ".pb.go")
SKIP_PREFIXES = ("zz_generated", "types_swagger_doc_generated")

STRUCT_RE = re.compile(r"^type (\w+) struct \{\s*$")
FIELD_RE = re.compile(r"^\s+(?:(\w+)\s+)?([^`]+?)?\s*`([^`]*)`")
TAG_RE = re.compile(r'(\w+):"([^"]*)"')


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def structs(text):
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = STRUCT_RE.match(lines[i])
        if not m:
            i += 1
            continue
        name, body = m.group(1), []
        i += 1
        while i < len(lines) and lines[i] != "}":
            body.append(lines[i])
            i += 1
        yield name, body


def fields(body):
    for line in body:
        s = line.strip()
        if not s or s.startswith("//") or "`" not in s:
            continue
        tags = dict(TAG_RE.findall(s[s.index("`") + 1 : s.rindex("`")]))
        pb = tags.get("protobuf")
        if pb is None or pb == "-":
            continue
        head = s[: s.index("`")].split()
        gotype = head[-1] if head else ""
        tag = pb.split(",")[1]
        parts = tags.get("json", "").split(",")
        flags = ""
        if gotype.startswith("*"):
            flags += "*"
        if "omitempty" not in parts[1:]:
            flags += "!"
        if "inline" in parts[1:]:
            flags += "^"
        if "omitzero" in parts[1:]:
            flags += "~"
        yield int(tag), (parts[0] or "-"), flags


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ref = sys.argv[1]
    out = []
    for repo, prefix in zip(sys.argv[2:], PREFIXES):
        files = git(repo, "ls-tree", "-r", "--name-only", ref).split("\n")
        pkgs = sorted({os.path.dirname(f) for f in files if f.endswith("/generated.proto")})
        for pkg in pkgs:
            proto_pkg = ".".join([prefix] + pkg.replace("-", "_").split("/"))
            for f in files:
                base = os.path.basename(f)
                if os.path.dirname(f) != pkg or not f.endswith(".go"):
                    continue
                if base.endswith(SKIP_SUFFIXES) or base.startswith(SKIP_PREFIXES):
                    continue
                for name, body in structs(git(repo, "show", f"{ref}:{f}")):
                    fs = sorted(fields(body))
                    if fs:
                        out.append(f"{proto_pkg}.{name} " + " ".join(f"{t}:{j}{fl}" for t, j, fl in fs))
    print(f"# Go facts for the protobuf codec, extracted from Kubernetes {ref} by gofacts/extract.py.")
    print("# <message> <tag>:<jsonName><flags>; flags: * pointer, ! no omitempty, ^ inline, ~ omitzero.")
    for line in sorted(out):
        print(line)


main()
