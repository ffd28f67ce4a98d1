"""How long `import dp` takes (every CLI call and every worker pays it), beside its floor: the
interpreter alone and the imports dp cannot do without (numpy, pyarrow with its compute and
Parquet modules, shapely). Each line runs in a fresh interpreter, best of --repeat (filters
out load from other processes); the table gives wall seconds, seconds above the bare
interpreter, and the ratio of that to the floor's.

    python benchmarks/import_time.py [--repeat 9]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINES = (("the interpreter alone", "pass"),
         ("numpy", "import numpy"),
         ("the floor: numpy, pyarrow (compute, parquet), shapely",
          "import numpy, pyarrow, pyarrow.compute, pyarrow.parquet, shapely"),
         ("import dp", "import dp"),
         ("import dp, then a release's modules in use (python -m dp release)",
          "import dp, dp.cli"))


def best(statement: str, repeat: int) -> float:
    """The fastest of `repeat` fresh interpreters running `statement`, in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], cwd=ROOT, check=True)
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args(argv)
    seconds = {name: best(stmt, args.repeat) for name, stmt in LINES}
    bare = seconds[LINES[0][0]]
    floor = seconds[LINES[2][0]] - bare
    print(f"| what | seconds (best of {args.repeat}) | above the interpreter | ÷ the floor |\n|---|---|---|---|")
    for name, _ in LINES:
        above = seconds[name] - bare
        print(f"| {name} | {seconds[name]:.3f} | {above:.3f} | {above / floor:.2f} |")


if __name__ == "__main__":
    main()
