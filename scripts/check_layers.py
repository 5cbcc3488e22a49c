#!/usr/bin/env python3
"""Fails the build when a file includes a header of a layer its own may not use.

The layers and their arrows are those of the Meson libraries (meson.build):
a layer may include its own headers and those of the layers listed for it.
Usage: check_layers.py SOURCE_ROOT STAMP
"""
import pathlib
import re
import sys

MAY_USE = {
    "core": [],
    "kernels": ["core"],
    "data": ["core"],
    "dist": ["core"],
    "nn": ["core", "kernels"],
    "launch": ["core", "dist"],
    "train": ["core", "kernels", "data", "dist", "nn"],
    "models": ["core", "kernels", "data", "nn"],
    "recipe": ["core", "kernels", "data", "dist", "launch", "nn", "train"],
    # The command line: run, sweep, plot, status, workspace, bench.
    "app": ["core", "kernels", "data", "dist", "launch", "nn", "train", "recipe"],
    "recipes": ["core", "kernels", "data", "dist", "launch", "nn", "train", "recipe", "models"],
    # The card backend (liblevers_cuda.so): the CUDA kernels and NCCL's group.
    "cuda_backend": ["core", "kernels", "dist"],
    # The network backend (liblevers_gloo.so): Gloo's group.
    "gloo_backend": ["core", "dist"],
}
# Files of the card backend that live beside their layer's interface.
CUDA_BACKEND_FILES = {"framework/dist/nccl_backend.cpp"}


def layer_of(path: str) -> str | None:
    if path == "framework/dist/gloo_backend.cpp":
        return "gloo_backend"
    if path in CUDA_BACKEND_FILES or path.startswith("kernels/cuda/"):
        return "cuda_backend"
    parts = path.split("/")
    if parts[0] == "framework" and len(parts) > 2:
        return parts[1]
    if parts[0] in ("kernels", "models", "recipes"):
        return parts[0]
    return None


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    wrong = []
    for top in ("framework", "kernels", "models", "recipes"):
        for f in sorted((root / top).rglob("*")):
            if f.suffix not in (".cpp", ".hpp", ".cu", ".cuh"):
                continue
            path = f.relative_to(root).as_posix()
            mine = layer_of(path)
            for header in include.findall(f.read_text(errors="replace")):
                theirs = layer_of(header)
                if theirs is None or theirs == mine:
                    continue
                if theirs not in MAY_USE[mine]:
                    wrong.append(f"{path}: includes {header}, but layer {mine} may use only "
                                 f"{', '.join(MAY_USE[mine]) or 'nothing'}")
    if wrong:
        print("layers: includes against the arrows (scripts/check_layers.py):", *wrong, sep="\n  ")
        return 1
    pathlib.Path(sys.argv[2]).write_text("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
