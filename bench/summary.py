"""What the benchmarks' reports share: the machine they ran on, and the JSON
rows their programs wrote."""
import json
import pathlib
import platform
import subprocess


def machine():
    """'machine: <CPU model>, <arch>, <cores> cores'."""
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    return f"machine: {cpu}, {platform.machine()}, {cores} cores"


def rows(path):
    """A file of one JSON object a line, as a list."""
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]
