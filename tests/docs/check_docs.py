#!/usr/bin/env python3
"""The documentation stays true of the tree: the README within 200 lines, its
first recipe the compiled example's own code, every link and every path it
names present, and one word for the hardware (GPU, never card).

Usage: check_docs.py SOURCE_ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
pages = [root / "README.md", root / "bench" / "README.md", *sorted((root / "docs").glob("*.md")),
         root / "levers" / "kernels" / "README.md"]
wrong = []

readme = (root / "README.md").read_text()
lines = readme.count("\n")
if lines > 200:
    wrong.append(f"README.md has {lines} lines; at most 200 (the rest goes to docs/)")

# The first recipe the README and docs/recipes.md show is the example's code, as it compiles.
example = (root / "docs" / "examples" / "fashion_cnn.cpp").read_text()
for page in (root / "README.md", root / "docs" / "recipes.md"):
    block = re.search(r"```cpp\n(.*?)```", page.read_text(), re.S)
    if not block or block.group(1) not in example:
        wrong.append(f"{page.relative_to(root)}: its first C++ block is not docs/examples/fashion_cnn.cpp's code")

PATH = re.compile(r"`((?:levers|recipes|tests|bench|scripts|docs|examples)/[\w./-]*[\w/])`")
LINK = re.compile(r"\]\(([^)#\s]+)")
for page in pages:
    text = page.read_text()
    where = page.relative_to(root)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)  # code's brackets are not links
    prose = re.sub(r"`[^`]*`", "", prose)
    for target in LINK.findall(prose):
        if "://" in target:
            continue
        if not (page.parent / target).exists():
            wrong.append(f"{where}: links to {target}, which does not exist")
    for path in PATH.findall(text):
        if any(c in path for c in "<>*{}") or not (root / path).exists():
            if not any(c in path for c in "<>*{}"):
                wrong.append(f"{where}: names {path}, which does not exist")
    for n, line in enumerate(text.splitlines(), 1):
        if re.search(r"\bcards?\b", line, re.I):
            wrong.append(f"{where}:{n}: says 'card' (the word is GPU)")

if wrong:
    print("docs:", *wrong, sep="\n  ")
    sys.exit(1)
print(f"docs: README.md {lines} lines; {len(pages)} pages' links and paths exist")
