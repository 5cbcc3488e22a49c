#!/usr/bin/env python3
"""The recipe builder's types: each snippet must fail to compile, saying why.

Usage: check_compile_fail.py SOURCE_ROOT COMPILER [FLAGS...]
"""
import pathlib
import subprocess
import sys
import tempfile

root, compiler, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
PRELUDE = """
#include "levers/recipe/recipe.hpp"
#include "levers/models/mlp.hpp"
using namespace levers;
struct Data {};
std::unique_ptr<models::Mlp> make_model(const Config&);
Data make_data(const Config&);
MicroResult step(models::Mlp&, Data&, const StepInfo&);
"""
CASES = {
    "a .step on another data type": (
        'Plan p = recipe("r").training({}).model(make_model).data(make_data)'
        '.step([](models::Mlp&, int&, const StepInfo&) { return MicroResult{}; });',
        ".step(fn) must take the types .model and .data make"),
    "a .step without .data": (
        'Plan p = recipe("r").training({}).model(make_model).step(step);',
        "declare .data before .step"),
    "a loop without .data": (
        'Plan p = recipe("r").training({}).model(make_model);',
        "the framework's loop needs both .model and .data"),
    "an evaluation on another model type": (
        'Plan p = recipe("r").training({}).model(make_model).data(make_data).step(step)'
        '.evaluate_every(10, [](int&, Data&) { return Metrics{}; });',
        ".evaluate_every(n, fn) must take the types .model and .data make"),
    "a misspelt loop setting": (
        'Plan p = recipe("r").training({.steps = 10, .warmpu = 5}).model(make_model).data(make_data).step(step);',
        "warmpu"),
    "a loop setting's old name": (
        'Plan p = recipe("r").training({}).model(make_model).data(make_data).step(step)'
        '.optimizer([](const Config&, train::LoopOptions&) {});',
        "optimizer"),
}
failed = 0
with tempfile.TemporaryDirectory() as tmp:
    for what, (code, said) in CASES.items():
        src = pathlib.Path(tmp) / "case.cpp"
        src.write_text(PRELUDE + code + "\n")
        r = subprocess.run([compiler, *flags, "-std=c++20", "-fsyntax-only", f"-I{root}", str(src)],
                           capture_output=True, text=True)
        if r.returncode == 0 or said not in r.stderr:
            failed += 1
            print(f"FAIL {what}: {'compiled' if r.returncode == 0 else 'another error'}\n{r.stderr[:2000]}")
        else:
            print(f"ok   {what}: refused at compile time ({said!r})")
    # The right recipe compiles, so the failures above are the checks', not the prelude's.
    src = pathlib.Path(tmp) / "good.cpp"
    src.write_text(PRELUDE + 'Plan p = recipe("r").training({.steps = 10}).model(make_model).data(make_data)'
                   '.step(step);\n')
    r = subprocess.run([compiler, *flags, "-std=c++20", "-fsyntax-only", f"-I{root}", str(src)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failed += 1
        print(f"FAIL the well-typed recipe does not compile:\n{r.stderr[:2000]}")
sys.exit(1 if failed else 0)
