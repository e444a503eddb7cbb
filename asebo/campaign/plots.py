"""The figures of a campaign, as in Wong and Kolter's Figs. 2 and 3, in PNG and PDF.

Fig. 2 of Wong and Kolter shows, per molecule, the lowest energy found so far averaged
over the runs against the number of force calls; Fig. 3 shows every run on water.
Here energies are relative to the lowest energy any run found for the molecule, on a
log scale. Drawn with matplotlib's Agg canvas, without pyplot's global state.
"""

from pathlib import Path

import numpy as np

from asebo.campaign.summary import best_energies, distinct
from asebo.extras import missing_extra

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
except ImportError as error:
    raise missing_extra(error, "campaign", "asebo.campaign.plots") from error

FLOOR = 1e-6  # eV: gaps below are drawn at the floor of the log scale
FORMATS = ("png", "pdf")


def running_best(energies, length):
    """The lowest energy after each call, held after the run's last call.

    Parameters
    ----------
    energies : ndarray, shape (calls,)
    length : int
        Calls to cover (at least ``calls``).

    Returns
    -------
    ndarray, shape (length,)
    """
    best = np.minimum.accumulate(np.asarray(energies, dtype=np.float64))  # (calls,)
    return np.concatenate([best, np.full(length - best.size, best[-1])])


def best_energy_curves(records):
    """The mean over runs of the best energy found after k calls, minus the best found.

    Parameters
    ----------
    records : list of asebo.campaign.RunRecord

    Returns
    -------
    dict of str to dict of str to ndarray
        ``curves[molecule][optimizer]``, shape (K,), entry ``k - 1`` for ``k`` calls,
        K the most calls of any run of the molecule; runs with no call are left out.

    References
    ----------
    Wong and Kolter, Fig. 2 ("the average minimum found over all 40 runs per iteration").
    """
    best = best_energies(records)
    curves = {}
    for molecule in distinct(r.molecule for r in records):
        runs = [r for r in records if r.molecule == molecule and r.energies.size]
        if not runs:
            continue
        length = max(r.energies.size for r in runs)
        curves[molecule] = {}
        for optimizer in distinct(r.optimizer for r in runs):
            stack = np.array(
                [running_best(r.energies, length) for r in runs if r.optimizer == optimizer]
            )  # (runs, K)
            curves[molecule][optimizer] = stack.mean(axis=0) - best[molecule]
    return curves


def _figure(rows, columns, width=3.2, height=2.6):
    figure = Figure(figsize=(width * columns, height * rows), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure, prefix, name):
    paths = []
    for extension in FORMATS:
        path = Path(f"{prefix}_{name}.{extension}")
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=100)
        paths.append(path)
    return paths


def plot_best_energy(records, prefix):
    """Wong and Kolter's Fig. 2: mean best energy against force calls, one panel a molecule.

    Parameters
    ----------
    records : list of asebo.campaign.RunRecord
    prefix : str or os.PathLike
        Writes ``{prefix}_best.png`` and ``{prefix}_best.pdf``.

    Returns
    -------
    list of pathlib.Path
    """
    curves = best_energy_curves(records)
    optimizers = distinct(r.optimizer for r in records)
    colours = {o: f"C{i}" for i, o in enumerate(optimizers)}
    columns = min(len(curves), 4) or 1
    rows = -(-len(curves) // columns) or 1
    figure = _figure(rows, columns)
    for index, (molecule, by_optimizer) in enumerate(curves.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        for optimizer, gap in by_optimizer.items():
            calls = np.arange(1, gap.size + 1)
            axes.plot(calls, np.maximum(gap, FLOOR), color=colours[optimizer], label=optimizer)
        axes.set_yscale("log")
        axes.set_title(molecule)
        axes.set_xlabel("force calls")
        axes.set_ylabel("mean best E − best found (eV)")
        axes.grid(alpha=0.3)
        if index == 0:
            axes.legend(fontsize="small")
    return _save(figure, prefix, "best")


def plot_runs(records, prefix):
    """Wong and Kolter's Fig. 3: the energy of every call of every run, molecule by optimizer.

    Parameters
    ----------
    records : list of asebo.campaign.RunRecord
    prefix : str or os.PathLike
        Writes ``{prefix}_runs.png`` and ``{prefix}_runs.pdf``.

    Returns
    -------
    list of pathlib.Path
    """
    best = best_energies(records)
    molecules = [m for m in distinct(r.molecule for r in records) if m in best]
    optimizers = distinct(r.optimizer for r in records)
    figure = _figure(max(len(molecules), 1), max(len(optimizers), 1), width=2.4, height=2.0)
    for i, molecule in enumerate(molecules):
        shared = None
        for j, optimizer in enumerate(optimizers):
            axes = figure.add_subplot(
                len(molecules),
                len(optimizers),
                i * len(optimizers) + j + 1,
                sharex=shared,
                sharey=shared,
            )
            shared = shared or axes
            for record in records:
                if record.molecule == molecule and record.optimizer == optimizer:
                    calls = np.arange(1, record.energies.size + 1)
                    axes.plot(
                        calls,
                        np.maximum(record.energies - best[molecule], FLOOR),
                        color="C3" if record.failed else f"C{j}",
                        lw=0.8,
                        alpha=0.7,
                    )
            axes.set_yscale("log")
            axes.grid(alpha=0.3)
            if i == 0:
                axes.set_title(optimizer)
            if i == len(molecules) - 1:
                axes.set_xlabel("force calls")
            if j == 0:
                axes.set_ylabel(f"{molecule}\nE − best found (eV)")
    return _save(figure, prefix, "runs")
