#!/usr/bin/env python3
"""The recipe builder's types and the parameters' handles: each snippet must
fail to compile, saying why. The cases compile two at a time.

Usage: check_compile_fail.py SOURCE_ROOT COMPILER [FLAGS...]
"""
import os
import pathlib
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

root, compiler, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
PRELUDE = """
#include "levers/recipe/recipe.hpp"
#include "levers/models/mlp.hpp"
using namespace levers;
struct Data {};
std::unique_ptr<models::Mlp> make_model(const Config&);
Data make_data(const Config&);
MicroResult step(models::Mlp&, Data&, const StepInfo&);
const Param<int> width{"width", 64, "hidden width", at_least(1)};
"""
CASES = {
    "a .step on another data type": (
        'Recipe p = recipe("r").training({}).model(make_model).data(make_data)'
        '.step([](models::Mlp&, int&, const StepInfo&) { return MicroResult{}; });',
        ".step(fn) must take the types .model and .data make"),
    "a .step without .data": (
        'Recipe p = recipe("r").training({}).model(make_model).step(step);',
        "declare .data before .step"),
    "a loop without .data": (
        'Recipe p = recipe("r").training({}).model(make_model);',
        "the framework's loop needs both .model and .data"),
    "an evaluation on another model type": (
        'Recipe p = recipe("r").training({.eval_every = 10}).model(make_model).data(make_data).step(step)'
        '.evaluate([](int&, Data&) { return Metrics{}; });',
        ".evaluate(fn) must take the types .model and .data make"),
    "a misspelt loop setting": (
        'Recipe p = recipe("r").training({.steps = 10, .warmpu = 5}).model(make_model).data(make_data).step(step);',
        "warmpu"),
    "a misspelt parameter handle": (
        'int w(const Config& c) { return c[widht]; }',
        "'widht' was not declared in this scope; did you mean 'width'?"),
    "a misspelt framework setting": (
        'long b(const Config& c) { return c[settings::batch_sise]; }',
        "'batch_sise' is not a member of 'levers::settings'; did you mean 'batch_size'?"),
    "a parameter read as another type": (
        'std::string w(const Config& c) { return c[width]; }',
        "could not convert"),
    "a parameter read by its name as text": (
        'long w(const Config& c) { return c.get<long>("width"); }',
        "'const class levers::Config' has no member named 'get'"),
    "a parameter declared by name, not by a handle": (
        'Recipe p = recipe("r").param("width", 64, "hidden width").run([](const Config&) { return Result{}; });',
        "has no member named 'param'; did you mean 'params'?"),
    "a handle whose default is of another type": (
        'const Param<int> depth{"depth", "two", "blocks"};',
        "invalid conversion from 'const char*' to 'int'"),
    "a handle of a type parameters cannot hold": (
        'const Param<Data> data{"data", Data{}, "no"};',
        "Param<T>: T is bool, an integer type"),
    "a loop setting's old name": (
        'Recipe p = recipe("r").training({}).model(make_model).data(make_data).step(step)'
        '.optimizer([](const Config&, train::LoopOptions&) {});',
        "optimizer"),
}
def compile_each(sources):
    """Compiles each file (-fsyntax-only), two at a time; their results in order."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda s: subprocess.run([compiler, *flags, "-std=c++20", "-fsyntax-only", f"-I{root}",
                                                       str(s)], capture_output=True, text=True,
                                                      env={**os.environ, "LC_ALL": "C"}), sources))


# The right recipe compiles, so the failures above are the checks', not the prelude's.
GOOD = ('int w(const Config& c) { return c[width] + static_cast<int>(c[settings::batch_size]); }\n'
        'Recipe p = recipe("r").training({.steps = 10, .batch_size = 8}).params(width).model(make_model)'
        '.data(make_data).step(step);\n')

failed = 0
with tempfile.TemporaryDirectory() as tmp:
    # The prelude precompiled once (GCC's PCH), so each case costs its own line only.
    header = pathlib.Path(tmp) / "prelude.hpp"
    header.write_text(PRELUDE)
    pch = subprocess.run([compiler, *flags, "-std=c++20", f"-I{root}", "-x", "c++-header", str(header), "-o",
                          str(header) + ".gch"], capture_output=True, text=True)
    if pch.returncode != 0:
        sys.exit(f"the prelude does not compile:\n{pch.stderr[:2000]}")
    sources = []
    for i, code in enumerate([code for code, _ in CASES.values()] + [GOOD]):
        sources.append(pathlib.Path(tmp) / f"case{i}.cpp")
        sources[-1].write_text('#include "prelude.hpp"\n' + code + "\n")
    results = compile_each(sources)
    for (what, (code, said)), r in zip(CASES.items(), results):
        if r.returncode == 0 or said not in r.stderr:
            failed += 1
            print(f"FAIL {what}: {'compiled' if r.returncode == 0 else 'another error'}\n{r.stderr[:2000]}")
        else:
            print(f"ok   {what}: refused at compile time ({said!r})")
    if results[-1].returncode != 0:
        failed += 1
        print(f"FAIL the well-typed recipe does not compile:\n{results[-1].stderr[:2000]}")
sys.exit(1 if failed else 0)
