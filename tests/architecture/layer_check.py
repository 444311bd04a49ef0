#!/usr/bin/env python3
"""The tree is the diagram (docs/architecture.md §Layers): checks every include in src/ against the layer order.

Reads the layer order from src/CMakeLists.txt (`foreach(layer ...)`) and each layer's link dependencies from
src/<layer>/CMakeLists.txt (`sp_layer(NAME DEPS ...)` or `target_link_libraries(sp_NAME ...)`), then requires:
  1. a layer links only layers listed before it (so the dependency graph has no cycle);
  2. a file in src/<layer>/ includes only its own layer's headers and those of layers it links, directly or
     transitively (an include that runs upward or sideways fails, naming file, line and both layers);
  3. MPI is included only in comm/ (every collective goes through the traced communicator), and only cli/
     reads the environment (getenv) or argv;
  4. TOML is parsed only in config/toml_fields.cc (the one TOML parser: every TOML file goes through it).
Exit status 0 when every rule holds; 1 with one line per violation. Run by ctest (label `architecture`)."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
SYSTEM_MPI = re.compile(r'^\s*#\s*include\s+[<"]mpi\.h[>"]', re.M)
GETENV = re.compile(r'\b(std::)?(secure_)?getenv\s*\(')
TOML_PARSE = re.compile(r'\btoml::parse(_file)?\s*\(')
TOML_PARSER = "config/toml_fields.cc"


def layer_order(src):
    text = open(os.path.join(src, "CMakeLists.txt")).read()
    m = re.search(r"foreach\(layer ([^)]*)\)", text)
    if not m:
        sys.exit(f"{src}/CMakeLists.txt: no foreach(layer ...) line")
    return m.group(1).split()


def layer_deps(src, layer):
    text = open(os.path.join(src, layer, "CMakeLists.txt")).read()
    deps = set(re.findall(r"\bsp_([a-z_]+)\b", text))
    deps.discard(layer)
    return deps


def check(src):
    order = layer_order(src)
    index = {name: i for i, name in enumerate(order)}
    problems = []
    deps = {}
    for layer in order:
        deps[layer] = {d for d in layer_deps(src, layer) if d in index}
        for d in sorted(deps[layer]):
            if index[d] >= index[layer]:
                problems.append(f"src/{layer}/CMakeLists.txt: links {d}, which is not below {layer} in src/CMakeLists.txt")
    allowed = {}
    for layer in order:  # transitive closure in layer order (deps point downward)
        allowed[layer] = {layer}
        for d in deps[layer]:
            allowed[layer] |= allowed.get(d, {d})
    files = 0
    for layer in order:
        root = os.path.join(src, layer)
        for d, _, names in os.walk(root):
            for n in sorted(names):
                if not n.endswith((".h", ".cc")):
                    continue
                path = os.path.join(d, n)
                rel = os.path.relpath(path, os.path.dirname(src))
                text = open(path, encoding="utf-8").read()
                files += 1
                for m in INCLUDE.finditer(text):
                    target = m.group(1)
                    if target in index and target not in allowed[layer]:
                        line = text.count("\n", 0, m.start()) + 1
                        kind = "upward" if index[target] > index[layer] else "to a layer it does not link"
                        problems.append(f"{rel}:{line}: includes {target}/ ({kind}: {layer} may use "
                                        f"{', '.join(sorted(allowed[layer] - {layer})) or 'nothing'})")
                if layer != "comm" and SYSTEM_MPI.search(text):
                    problems.append(f"{rel}: includes mpi.h outside comm/")
                if layer != "cli" and GETENV.search(text):
                    problems.append(f"{rel}: reads the environment outside cli/")
                if not rel.endswith(TOML_PARSER) and TOML_PARSE.search(text):
                    problems.append(f"{rel}: parses TOML outside {TOML_PARSER} (use config::parse_toml_file/_text)")
    return problems, files, order


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../src"))
    problems, files, order = check(src)
    for p in problems:
        print(p)
    print(f"{files} files in {len(order)} layers ({' < '.join(order)}): {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
