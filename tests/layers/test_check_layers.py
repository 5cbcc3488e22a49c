#!/usr/bin/env python3
"""scripts/check_layers.py passes the tree as it is, and fails an include against the arrows or a member
defined outside the layer that declares its class, naming it."""
import pathlib
import shutil
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
check = root / "scripts" / "check_layers.py"
with tempfile.TemporaryDirectory() as tmp:
    copy = pathlib.Path(tmp)
    for top in ("levers", "recipes"):
        shutil.copytree(root / top, copy / top)
    ok = subprocess.run([sys.executable, check, copy, copy / "ok"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    cases = [
        ("levers/core/tensor.cpp", "levers/distributed/context.hpp", "layer core may use only nothing"),
        ("levers/distributed/backend.cpp", "levers/launch/launcher.hpp", "layer distributed may use only core"),
        ("levers/models/gpt.cpp", "levers/train/loop.hpp", "layer models may use only core, kernels, data, nn"),
        ("levers/kernels/matmul.cpp", "levers/nn/module.hpp", "layer kernels may use only core"),
        ("levers/recipe/recipe.cpp", "levers/app/bench/bench_cli.hpp", "layer recipe may use only"),
    ]
    for path, header, said in cases:
        f = copy / path
        original = f.read_text()
        f.write_text(original + f'\n#include "{header}"\n')
        bad = subprocess.run([sys.executable, check, copy, copy / "ok"], capture_output=True, text=True)
        f.write_text(original)
        assert bad.returncode == 1, (path, bad.stdout)
        assert f"{path}: includes {header}, but {said}" in bad.stdout, bad.stdout
    # Members defined in another layer than their class's header (as Recipe::map once was, in the app).
    definitions = [
        ("levers/app/sweep.cpp", "namespace levers {\nvoid Recipe::extra() const {}\n}\n", "Recipe::extra", "recipe"),
        ("levers/train/loop.cpp", "namespace levers {\nint ParamSet::extra() { return 0; }\n}\n",
         "ParamSet::extra", "core"),
    ]
    for path, code, member, layer in definitions:
        f = copy / path
        original = f.read_text()
        f.write_text(original + "\n" + code)
        bad = subprocess.run([sys.executable, check, copy, copy / "ok"], capture_output=True, text=True)
        f.write_text(original)
        assert bad.returncode == 1, (path, bad.stdout)
        assert f"{path}: defines {member}, which layer {layer} declares" in bad.stdout, bad.stdout
print("layers: the tree passes; 5 includes against the arrows and 2 misplaced definitions are refused")
