#!/usr/bin/env python3
"""The workspace's crate graph, read from `cargo metadata`, and the layering rules it must keep.

    scripts/crate-graph.py            print the graph
    scripts/crate-graph.py --write    write it into docs/architecture.md (between the markers)
    scripts/crate-graph.py --check    fail if a rule is broken or the document's graph is stale

The rules (docs/architecture.md, "Crates"): every crate has a layer, and a crate depends only
on crates of lower layers, so nothing imports what is built on it and front doors never import
each other; the clients of coderd (daemon, agent, converter, SDK, provider) depend on no
server crate. Only normal dependencies count: a crate's tests may start a whole server.
"""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- crate-graph:begin (scripts/crate-graph.py --write) -->"
END = "<!-- crate-graph:end -->"

# (layer, name, crates), lowest first. A crate may depend only on crates of a lower layer.
LAYERS = [
    (0, "leaf libraries", ["codersdk", "oauth-client", "terraform-provider-coder",
                           "coderd-authz", "coderd-schedule"]),
    (1, "clients of coderd", ["provisioner-terraform", "agent"]),
    (2, "clients of coderd", ["provisionerd"]),
    (3, "store", ["coderd-store"]),
    (4, "core", ["coderd-core"]),
    (5, "HTTP kit", ["coderd-http"]),
    (6, "capabilities", ["coderd-relay", "coderd-sso", "coderd-executors"]),
    (7, "capabilities over the relay", ["coderd-tasks"]),
    (8, "front doors", ["coderd-api", "dashboard"]),
    (9, "assembly", ["coderd"]),
    (10, "binary and tools", ["cli", "testutil", "bench"]),
]
SERVER = {c for layer, _, crates in LAYERS if 3 <= layer <= 9 for c in crates}
CLIENTS = ["codersdk", "provisionerd", "provisioner-terraform", "agent", "terraform-provider-coder"]


def workspace_graph():
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    meta = json.loads(out)
    names = {p["name"] for p in meta["packages"]}
    graph = {}
    for p in meta["packages"]:
        deps = {d["name"] for d in p["dependencies"] if d["kind"] is None and d["name"] in names}
        graph[p["name"]] = sorted(deps)
    return graph


def problems(graph):
    layer_of = {c: layer for layer, _, crates in LAYERS for c in crates}
    found = []
    for crate in sorted(graph):
        if crate not in layer_of:
            found.append(f"{crate} has no layer in scripts/crate-graph.py")
            continue
        for dep in graph[crate]:
            if dep not in layer_of:
                continue
            if layer_of[dep] >= layer_of[crate]:
                found.append(
                    f"{crate} (layer {layer_of[crate]}) depends on {dep} (layer {layer_of[dep]})"
                )
    for client in CLIENTS:
        for dep in graph.get(client, []):
            if dep in SERVER:
                found.append(f"{client} is a client of coderd and depends on server crate {dep}")
    return found


def render(graph):
    lines = ["```"]
    for layer, name, crates in reversed(LAYERS):
        present = [c for c in crates if c in graph]
        if not present:
            continue
        lines.append(f"{layer:>2} {name}")
        for c in present:
            deps = ", ".join(graph[c]) if graph[c] else "(none of ours)"
            lines.append(f"     {c:<26} -> {deps}")
    lines.append("```")
    return "\n".join(lines)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--print"
    graph = workspace_graph()
    broken = problems(graph)
    text = render(graph)
    if mode == "--print":
        print(text)
    doc = DOC.read_text()
    start, stop = doc.find(BEGIN), doc.find(END)
    if start < 0 or stop < start:
        print(f"crate-graph: {DOC} has no graph markers", file=sys.stderr)
        return 1
    current = doc[start + len(BEGIN):stop].strip("\n")
    if mode == "--write":
        DOC.write_text(doc[: start + len(BEGIN)] + "\n" + text + "\n" + doc[stop:])
    elif mode == "--check" and current != text:
        print("crate-graph: docs/architecture.md's graph is stale; run scripts/crate-graph.py --write",
              file=sys.stderr)
        broken.append("stale document")
    for p in broken:
        print(f"crate-graph: {p}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
