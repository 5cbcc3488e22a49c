#!/usr/bin/env python3
"""Fails the build when a file includes a header of a layer its own may not use,
or defines a member of a class another layer declares.

The layers are the folders of levers/ and their arrows those of the Meson
libraries (levers/<layer>/meson.build):
a layer may include its own headers and those of the layers listed for it,
and defines what its own headers declare (a member defined in a layer above
its class would let the class's users reach up, past the arrows, at link time).
Usage: check_layers.py SOURCE_ROOT STAMP
"""
import pathlib
import re
import sys

# In docs/architecture.md's order: a layer may use only layers before it.
MAY_USE = {
    "core": [],
    "kernels": ["core"],
    "data": ["core"],
    "distributed": ["core"],
    "launch": ["core", "distributed"],
    "nn": ["core", "kernels"],
    "train": ["core", "kernels", "data", "distributed", "nn"],
    "models": ["core", "kernels", "data", "nn"],
    "recipe": ["core", "kernels", "data", "distributed", "launch", "nn", "train"],
    # The command line: run, sweep, plot, status, workspace, bench.
    "app": ["core", "kernels", "data", "distributed", "launch", "nn", "train", "recipe"],
    # The shipped recipes (recipes/, beside the tree): every layer but app.
    "recipes": ["core", "kernels", "data", "distributed", "launch", "nn", "train", "recipe", "models"],
    # The GPU backend (liblevers_cuda.so): the CUDA kernels and NCCL's group.
    "cuda_backend": ["core", "kernels", "distributed"],
    # The network backend (liblevers_gloo.so): Gloo's group.
    "gloo_backend": ["core", "distributed"],
}
# Files of the GPU backend that live beside their layer's interface.
CUDA_BACKEND_FILES = {"levers/distributed/nccl_backend.cpp"}


def layer_of(path: str) -> str | None:
    if path == "levers/distributed/gloo_backend.cpp":
        return "gloo_backend"
    if path in CUDA_BACKEND_FILES or path.startswith("levers/kernels/cuda/"):
        return "cuda_backend"
    parts = path.split("/")
    if parts[0] == "levers" and len(parts) > 2:
        return parts[1]
    if parts[0] == "recipes":
        return parts[0]
    return None


# The layer whose headers a backend file implements: NCCL's and Gloo's groups
# are distributed's Backend, the CUDA kernels are kernels'.
def home_layer(path: str) -> str | None:
    layer = layer_of(path)
    if layer == "cuda_backend":
        return "kernels" if path.startswith("levers/kernels/") else "distributed"
    return "distributed" if layer == "gloo_backend" else layer


CLASS = re.compile(r'^\s*(?:template\s*<[^>]*>\s*)?(?:class|struct)\s+(\w+)(?:\s+final)?\s*(?::[^;{]*)?\{', re.M)
# A member defined out of its class, at the start of a line (namespaces are not indented).
MEMBER = re.compile(r'^(?![ \t#/]|return\b|using\b)[^;{}()=]*?\b(\w+)::~?(\w+)\s*\(', re.M)


def files(root: pathlib.Path):
    for top in ("levers", "recipes"):
        for f in sorted((root / top).rglob("*")):
            if f.suffix in (".cpp", ".hpp", ".cu", ".cuh"):
                yield f.relative_to(root).as_posix(), f.read_text(errors="replace")


def misplaced_definitions(sources: dict[str, str]) -> list[str]:
    declared: dict[str, set[str]] = {}  # class name -> layers whose headers declare it
    for path, text in sources.items():
        if path.endswith((".hpp", ".cuh")):
            for name in CLASS.findall(text):
                declared.setdefault(name, set()).add(home_layer(path))
    wrong = []
    for path, text in sources.items():
        if not path.endswith((".cpp", ".cu")):
            continue
        mine, local = home_layer(path), set(CLASS.findall(text))
        for cls, member in MEMBER.findall(text):
            layers = declared.get(cls)
            if layers and mine not in layers and cls not in local:
                wrong.append(f"{path}: defines {cls}::{member}, which layer {'/'.join(sorted(layers))} declares; "
                             f"define it there")
    return wrong


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    include = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.M)
    sources = dict(files(root))
    wrong = []
    for path, text in sources.items():
        mine = layer_of(path)
        for header in include.findall(text):
            theirs = layer_of(header)
            if theirs is None or theirs == mine:
                continue
            if theirs not in MAY_USE[mine]:
                wrong.append(f"{path}: includes {header}, but layer {mine} may use only "
                             f"{', '.join(MAY_USE[mine]) or 'nothing'}")
    if wrong:
        print("layers: includes against the arrows (scripts/check_layers.py):", *wrong, sep="\n  ")
        return 1
    wrong = misplaced_definitions(sources)
    if wrong:
        print("layers: definitions outside their declaring layer (scripts/check_layers.py):", *wrong, sep="\n  ")
        return 1
    pathlib.Path(sys.argv[2]).write_text("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
