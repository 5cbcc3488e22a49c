#!/usr/bin/env python3
"""Checks that a run on two nodes ends where one node's does: loss and val_loss
of two result.json files within 1e-6 relative (the nodes' sums are added in
another order, so not bitwise). Usage: within_1e6.py ONE_NODE TWO_NODES LABEL"""
import json
import sys

one, two = (json.load(open(p)) for p in sys.argv[1:3])
label = sys.argv[3]
for key in ("loss", "val_loss"):
    error = abs(two[key] - one[key]) / abs(one[key])
    print(f"{label}, {key}: one node {one[key]!r}, two nodes {two[key]!r}, relative difference {error:.2e}")
    if error > 1e-6:
        sys.exit(f"{label}: two nodes differ from one in {key} by {error:.2e} (limit 1e-6)")
