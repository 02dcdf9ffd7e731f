#!/usr/bin/env python3
"""Figures of the house's shape, for reviews and closing notes (reads src/ only, builds nothing).

    python3 scripts/structure.py [--rev REV]

Prints: files under src/ over 800 lines; `Status::` constructors outside src/server/status.rs
(conversions such as `Status::from` are counted apart); import cycles between the crate's
modules (one node per file, edges from `crate::a::b` paths and `super::` uses); raw option
reads (`.get("...")` with a Paimon option key) outside src/spec/options.rs.
"""
import argparse
import re
import subprocess
import sys
from collections import defaultdict


def files(rev):
    if rev:
        names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "src"],
                               capture_output=True, text=True, check=True).stdout.split()
        return {n: subprocess.run(["git", "show", f"{rev}:{n}"], capture_output=True, text=True,
                                  check=True).stdout for n in names if n.endswith(".rs")}
    out = subprocess.run(["git", "ls-files", "src"], capture_output=True, text=True, check=True)
    return {n: open(n, encoding="utf-8").read() for n in out.stdout.split() if n.endswith(".rs")}


def module_of(path):
    """src/table/write.rs -> table::write; src/table/mod.rs -> table; src/lib.rs -> ''."""
    p = path[len("src/"):-len(".rs")]
    if p in ("lib", "main"):
        return ""
    if p.endswith("/mod"):
        p = p[: -len("/mod")]
    return p.replace("/", "::")


def strip_tests(text):
    i = text.find("#[cfg(test)]")
    return text if i < 0 else text[:i]


def cycles(sources):
    modules = {module_of(p): strip_tests(t) for p, t in sources.items() if not p.startswith("src/main") and not p.startswith("src/cli")}
    names = set(modules)
    graph = defaultdict(set)
    for m, text in modules.items():
        code = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
        for path in re.findall(r"crate::((?:[a-z_0-9]+::)*[a-z_0-9]+)", code):
            parts = path.split("::")
            # the longest prefix that is a module
            for k in range(len(parts), 0, -1):
                cand = "::".join(parts[:k])
                if cand in names:
                    top_from, top_to = m.split("::")[0], cand.split("::")[0]
                    if top_from != top_to:
                        graph[top_from].add(top_to)
                    break
    # strongly connected components over top-level modules (Tarjan)
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return sccs, graph


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rev", help="measure this commit instead of the work tree")
    args = ap.parse_args()
    sources = files(args.rev)
    big = sorted(((len(t.splitlines()), p) for p, t in sources.items() if len(t.splitlines()) > 800), reverse=True)
    print(f"files over 800 lines: {len(big)}")
    for n, p in big:
        print(f"  {n:5d} {p}")
    ctor = re.compile(r"Status::(?!from\b)[a-z_]+\(")
    outside = defaultdict(int)
    for p, t in sources.items():
        if p.startswith("src/server/") and not p.endswith("status.rs"):
            outside[p] += len(ctor.findall(strip_tests(t)))
    total = sum(outside.values())
    print(f"Status constructors outside src/server/status.rs: {total}")
    for p, n in sorted(outside.items()):
        if n:
            print(f"  {n:3d} {p}")
    sccs, _ = cycles(sources)
    print(f"import cycles between top-level modules: {len(sccs)}")
    for c in sccs:
        print("  " + " <-> ".join(c))
    raw = re.compile(r'\.get\("((?:num-sorted-run|snapshot|changelog|write-only|full-compaction|consumer|compaction|num-levels|target-file-size|commit)[^"]*)"\)')
    hits = [(p, k) for p, t in sources.items() if not p.endswith("spec/options.rs") for k in raw.findall(strip_tests(t))]
    print(f"raw option reads outside src/spec/options.rs: {len(hits)}")
    for p, k in hits:
        print(f"  {p}: {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
