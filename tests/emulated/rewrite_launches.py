#!/usr/bin/env python3
"""Rewrites CUDA sources into C++ that the emulated GPU runs on the host.

    rewrite_launches.py OUTDIR FILE...

Each levers/kernels/cuda/NAME.cu becomes OUTDIR/NAME.cpp and each NAME.cuh becomes
OUTDIR/NAME.cuh, with three changes and every line kept where it was (a
#line directive names the original file, so errors and sanitizer reports
point at it):
  - kernel<<<grid, block, shared, stream>>>(args) becomes
    ::levers::emulation::launch(grid, block, shared, stream)(
        [=](auto... a) { kernel(a...); }, args)
    (the arguments are evaluated and copied at the launch; the kernel runs
    when its stream gets to it);
  - extern __shared__ [__align__(N)] T name[]; becomes a pointer to the
    launch's dynamic shared memory;
  - #include "levers/kernels/cuda/X.cuh" names the rewritten copy beside it.
"""
import pathlib
import re
import sys

DYNAMIC_SHARED = re.compile(r'extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?((?:unsigned\s+)?\w+)\s+(\w+)\[\];')
LOCAL_INCLUDE = re.compile(r'#include "levers/kernels/cuda/(\w+\.cuh)"')


def kernel_start(src, end):
    """Where the kernel expression before `<<<` at `end` starts: a name with
    scopes and template arguments (balanced angle brackets)."""
    i, depth = end, 0
    while i > 0:
        c = src[i - 1]
        if c == '>':
            depth += 1
        elif c == '<' and depth > 0:
            depth -= 1
        elif depth == 0 and not (c.isalnum() or c in '_:'):
            break
        i -= 1
    return i


def closing_paren(src, open_at):
    depth = 0
    for i in range(open_at, len(src)):
        if src[i] == '(':
            depth += 1
        elif src[i] == ')':
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit(f'unbalanced parentheses after offset {open_at}')


def rewrite_launches(src, path):
    out, i = [], 0
    while (at := src.find('<<<', i)) >= 0:
        start = kernel_start(src, at)
        cfg_end = src.find('>>>', at)
        if cfg_end < 0 or src[cfg_end + 3] != '(':
            raise SystemExit(f'{path}: a launch without ">>>(" after offset {at}')
        args_end = closing_paren(src, cfg_end + 3)
        kernel, cfg, args = src[start:at], src[at + 3:cfg_end], src[cfg_end + 4:args_end]
        out.append(src[i:start])
        args = f', {args}' if args.strip() else ''
        out.append(f'::levers::emulation::launch({cfg})([=](auto... a) {{ {kernel}(a...); }}{args})')
        i = args_end + 1
    out.append(src[i:])
    return ''.join(out)


def main():
    outdir, inputs = pathlib.Path(sys.argv[1]), sys.argv[2:]
    for name in inputs:
        path = pathlib.Path(name)
        src = path.read_text()
        src = DYNAMIC_SHARED.sub(
            lambda m: f'{m[1]}* {m[2]} = reinterpret_cast<{m[1]}*>(::levers::emulation::dynamic_shared());', src)
        src = LOCAL_INCLUDE.sub(r'#include "\1"', src)
        src = rewrite_launches(src, path)
        target = outdir / (path.stem + '.cpp' if path.suffix == '.cu' else path.name)
        target.write_text(f'#line 1 "{path.as_posix()}"\n' + src)


if __name__ == '__main__':
    main()
