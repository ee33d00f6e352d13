#!/usr/bin/env python3
"""Lists the public API of the library modules, one text file per module, for `make api`.

Usage: scripts/api-listing.py OUT_DIR [--symbol-graphs DIR] [--modules A,B,...]

Without --symbol-graphs it runs `swift package dump-symbol-graph --minimum-access-level public
--skip-synthesized-members` (which builds what is not built yet) and reads the graphs it writes.
Without --modules it lists the Swift modules of the package's library products and the Swift
targets they depend on (`swift package describe`), so that a new library module is listed too.

Each OUT_DIR/<Module>.txt starts with a line that counts the module's public types (structures,
classes, enumerations, protocols and actors, nested ones included) and declarations, then has one
sorted line per public declaration, `Name.path (kind): declaration`, and one per protocol
conformance, `Name (conformance): Protocol`. Members a module adds to another module's types are
named with that module first (`DarkroomCore.ImageSource.foo`). `make api-check` compares a fresh
listing with the committed one, so that every change of the public API shows in review.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

SWIFT = os.environ.get("SWIFT", "swift")
TYPE_KINDS = {"swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.actor"}
# Conformances every type has without saying so.
IMPLIED = {"Swift.Copyable", "Swift.Escapable", "Swift.SendableMetatype"}


def run(arguments: list[str]) -> str:
    result = subprocess.run(arguments, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        sys.exit(f"api-listing: {' '.join(arguments)} failed ({result.returncode})")
    return result.stdout


def library_modules() -> list[str]:
    """The Swift targets of the library products, with the Swift targets they depend on."""
    description = json.loads(run([SWIFT, "package", "describe", "--type", "json"]))
    targets = {target["name"]: target for target in description["targets"]}
    pending = [
        name for product in description["products"] if "library" in product["type"] for name in product["targets"]
    ]
    found: set[str] = set()
    while pending:
        name = pending.pop()
        target = targets.get(name)
        if name in found or target is None or target.get("module_type") != "SwiftTarget" or target.get("type") != "library":
            continue
        found.add(name)
        pending.extend(target.get("target_dependencies", []))
    return sorted(found)


def dump_symbol_graphs() -> pathlib.Path:
    output = run([SWIFT, "package", "dump-symbol-graph", "--minimum-access-level", "public", "--skip-synthesized-members"])
    match = re.search(r"Files written to (.+)", output)
    if match is None:
        sys.exit("api-listing: dump-symbol-graph did not say where it wrote the graphs")
    return pathlib.Path(match.group(1).strip())


def spelled(fragments: list[dict]) -> str:
    return re.sub(r"\s+", " ", "".join(fragment["spelling"] for fragment in fragments)).strip()


def constraints(relationship: dict) -> str:
    parts = [f"{c['lhs']} {':' if c['kind'] == 'conformance' else '=='} {c['rhs']}" for c in relationship.get("swiftConstraints", [])]
    return " where " + ", ".join(parts) if parts else ""


def listing(module: str, graphs: pathlib.Path) -> tuple[list[str], int, int]:
    """The lines of one module's listing, its number of public types, and of declarations."""
    lines: list[str] = []
    types = declarations = 0
    for path in sorted(graphs.glob(f"{module}.symbols.json")) + sorted(graphs.glob(f"{module}@*.symbols.json")):
        graph = json.loads(path.read_text(encoding="utf-8"))
        names: dict[str, str] = {}
        for symbol in graph["symbols"]:
            name = ".".join(symbol["pathComponents"])
            extended = symbol.get("swiftExtension", {}).get("extendedModule", module)
            if extended != module:
                name = f"{extended}.{name}"
            names[symbol["identifier"]["precise"]] = name
            kind = symbol["kind"]["identifier"]
            declaration = spelled(symbol.get("declarationFragments", [])) or symbol["names"]["title"]
            lines.append(f"{name} ({kind.removeprefix('swift.')}): {declaration}")
            declarations += 1
            types += kind in TYPE_KINDS
        for relationship in graph["relationships"]:
            if relationship["kind"] != "conformsTo" or relationship["source"] not in names:
                continue
            target = names.get(relationship["target"]) or relationship.get("targetFallback") or relationship["target"]
            if target in IMPLIED:
                continue
            lines.append(f"{names[relationship['source']]} (conformance): {target}{constraints(relationship)}")
    return sorted(set(lines)), types, declarations


def main() -> int:
    arguments = sys.argv[1:]
    if not arguments or arguments[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 64
    out = pathlib.Path(arguments[0])
    options = dict(zip(arguments[1::2], arguments[2::2]))
    graphs = pathlib.Path(options["--symbol-graphs"]) if "--symbol-graphs" in options else dump_symbol_graphs()
    modules = options["--modules"].split(",") if "--modules" in options else library_modules()
    out.mkdir(parents=True, exist_ok=True)
    total_types = total_declarations = 0
    for module in modules:
        if not (graphs / f"{module}.symbols.json").exists():
            sys.exit(f"api-listing: no symbol graph for {module} in {graphs}")
        lines, types, declarations = listing(module, graphs)
        header = f"# {module}: {types} public types, {declarations} public declarations (make api writes this file)"
        (out / f"{module}.txt").write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
        print(f"{module}: {types} public types, {declarations} public declarations")
        total_types += types
        total_declarations += declarations
    print(f"total: {total_types} public types, {total_declarations} public declarations in {len(modules)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
