#!/usr/bin/env python3
"""Figures of the house's shape, for reviews and closing notes (reads src/ only, builds nothing).

    python3 scripts/structure.py [--rev REV]

Prints: files under src/ over 800 lines; `Status::` constructors outside src/server/status.rs
(conversions such as `Status::from` are counted apart); import cycles between the crate's
top-level modules; import circles between the files of one top-level module; raw option reads
(`.get("...")` with a Paimon option key) outside src/spec/options.rs.

A file imports another when it takes a name the other defines: through a `use` (other than a
`pub use`, which re-exports: its users are counted as taking the name from where it is defined)
or a `crate::`/`super::`/`self::` path in its code. Test modules (`#[cfg(test)]` and the
`tests.rs` beside a module) do not count.

With --check it exits 1 when there is an import cycle between top-level modules, a circle
inside one that KNOWN_CIRCLES does not hold, or a file over 800 lines (scripts/test.sh runs it
so). KNOWN_CIRCLES is debt written down: circles that remain to be cut, which may shrink but
never grow; a new circle fails the check.
"""
import argparse
import re
import subprocess
import sys
from collections import defaultdict


# Circles still to cut (each a set of files); a circle passes the check when its files are all
# in one of these. Remove an entry once its circle is gone.
KNOWN_CIRCLES = [
]


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


def strongly_connected(nodes, graph):
    """The strongly connected components (Tarjan) with more than one node, each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out)


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
    return strongly_connected(list(graph), graph), graph


ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|unsafe\s+|const\s+)*"
    r"(?:fn|struct|enum|trait|type|const|static|mod|union)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M)
MACRO = re.compile(r"^\s*macro_rules!\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
INLINE = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (aliases dropped, globs kept as `*`)."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [tree.split("as")[0] if "::" in tree or tree else tree]
    prefix, inner = tree[:i], tree[i + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        for e in expand(p):
            out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


def file_circles(sources):
    """Circles of files inside each top-level module: [(top, [files])]."""
    files = {p: t for p, t in sources.items()
             if not p.startswith(("src/main", "src/cli")) and not p.endswith("/tests.rs")}
    mod_file = {module_of(p): p for p in files}
    defs, reexports = {}, {}
    for p, t in files.items():
        code = strip_tests(t)
        defs[p] = set(ITEM.findall(code)) | set(MACRO.findall(code))
        reexports[p] = {}
        for vis, tree in USE.findall(code):
            if vis:
                for path in expand(tree):
                    reexports[p][path.split("::")[-1]] = path

    def absolute(path, here):
        parts = path.split("::")
        mod = module_of(here).split("::") if module_of(here) else []
        if parts[0] == "crate":
            return parts[1:]
        if parts[0] == "self":
            return mod + parts[1:]
        while parts and parts[0] == "super":
            mod, parts = mod[:-1], parts[1:]
        return mod + parts if path.startswith("super") else None

    def resolve(parts, depth=0):
        """The file that defines what `parts` (absolute) names."""
        for k in range(len(parts), 0, -1):
            m = "::".join(parts[:k])
            if m in mod_file:
                f = mod_file[m]
                rest = parts[k:]
                if rest and rest[0] in reexports[f] and rest[0] not in defs[f] and depth < 8:
                    target = absolute(reexports[f][rest[0]], f)
                    if target is None:  # relative to the re-exporting module
                        target = m.split("::") + reexports[f][rest[0]].split("::")
                    return resolve(target + rest[1:], depth + 1) or f
                return f
        return None

    edges = defaultdict(set)
    for p, t in files.items():
        code = "\n".join(l for l in strip_tests(t).splitlines() if not l.lstrip().startswith("//"))
        paths = []
        for vis, tree in USE.findall(code):
            if not vis:
                paths.extend(expand(tree))
        paths.extend(INLINE.findall(code))
        for path in paths:
            parts = absolute(path, p)
            if not parts:
                continue
            target = resolve([x for x in parts if x != "*"])
            if target and target != p and module_of(target).split("::")[0] == module_of(p).split("::")[0]:
                edges[p].add(target)
    return strongly_connected(files, edges), edges


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rev", help="measure this commit instead of the work tree")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 on an import cycle or circle, or a file over 800 lines")
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
    circles, edges = file_circles(sources)
    print(f"import circles between the files of one top-level module: {len(circles)}")
    new = [c for c in circles if not any(set(c) <= set(k) for k in KNOWN_CIRCLES)]
    for c in circles:
        known = "" if c in new else " (known, to be cut)"
        print(f"  {len(c)} files{known}: " + ", ".join(c))
        for a in c:
            for b in sorted(edges[a] & set(c)):
                print(f"      {a} -> {b}")
    raw = re.compile(r'\.get\("((?:num-sorted-run|snapshot|changelog|write-only|full-compaction|consumer|compaction|num-levels|target-file-size|commit)[^"]*)"\)')
    hits = [(p, k) for p, t in sources.items() if not p.endswith("spec/options.rs") for k in raw.findall(strip_tests(t))]
    print(f"raw option reads outside src/spec/options.rs: {len(hits)}")
    for p, k in hits:
        print(f"  {p}: {k}")
    if args.check and (sccs or new or big):
        print("structure check failed: see the cycles, circles or long files above")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
