"""Time and peak memory of BOOptimizer steps against observations, from steptime records.

Each argument is ``LABEL=FILE`` with FILE written by
``asebo bench steptime --json FILE``; a label ending in ``(before)`` is drawn dashed.

    python examples/plot_steptime.py "menthone, 29 atoms=menthone.json" \\
        "C32H66, 98 atoms=c32.json" --output steptime.png
"""

import argparse
import json

import matplotlib.pyplot as plt
import numpy as np


def _smoothed(values, width=5):
    """Running median over ``width`` steps: single steps vary with the LCB search."""
    values = np.asarray(values)
    half = width // 2
    return np.array(
        [np.median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))]
    )


def _read(parser, record):
    """``(label, data)`` of a ``LABEL=FILE`` argument; the parser's error where it names
    no label, no readable file or no ``asebo bench steptime --json`` record."""
    label, _, path = record.rpartition("=")
    if not label:
        parser.error(f"{record!r}: give each record as LABEL=FILE")
    try:
        with open(path) as fd:
            data = json.load(fd)
    except (OSError, ValueError) as error:
        parser.error(f"{path}: {error}")
    missing = {"observations", "seconds", "peak_gib"} - set(data)
    if missing:
        parser.error(f"{path} is no 'asebo bench steptime --json' record: no {sorted(missing)}")
    return label, data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="LABEL=FILE")
    parser.add_argument("--output", default="steptime.png")
    args = parser.parse_args()
    records = [_read(parser, record) for record in args.records]
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for label, data in records:
        style = "--" if label.endswith("(before)") else "-"
        (line,) = time_axis.plot(
            data["observations"], _smoothed(data["seconds"]), style, label=label
        )
        memory_axis.plot(
            data["observations"], data["peak_gib"], style, color=line.get_color(), label=label
        )
    time_axis.set(
        xlabel="observations",
        ylabel="s per step outside the calculator",
        yscale="log",
        title="processor time, one thread (running median of 5)",
    )
    memory_axis.set(
        xlabel="observations",
        ylabel="peak resident memory, GiB",
        title="memory of the whole process",
    )
    memory_axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
