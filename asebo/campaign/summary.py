"""The summary table of a campaign: force calls, success, energy gaps, ratio to L-BFGS.

The measure of cost is the number of force calls (Wong and Kolter, section "Bayesian
optimization": "we report results in terms of the number of (expensive) simulation
iterations required").
"""

from dataclasses import dataclass

import numpy as np

ALL = "all"
REFERENCE_OPTIMIZER = "lbfgs"


@dataclass
class SummaryRow:
    """One line of the summary: an optimizer on a molecule, or on all of them.

    Attributes
    ----------
    molecule : str
        A molecule's label, or ``'all'`` for the runs of every molecule pooled.
    optimizer : str
    runs, converged, failed : int
        Runs, runs that reached ``fmax``, runs that raised.
    calls_mean, calls_median, calls_max : float
        Force calls of the converged runs; NaN when none converged.
    gap_mean, gap_max : float
        Final energy minus the molecule's best energy found (the lowest energy of any
        call of any run of the molecule), eV, over the runs that did not raise.
    ratio : float
        ``calls_mean`` over L-BFGS's ``calls_mean`` on the same molecule(s); NaN
        without L-BFGS runs.
    """

    molecule: str
    optimizer: str
    runs: int
    converged: int
    failed: int
    calls_mean: float
    calls_median: float
    calls_max: float
    gap_mean: float
    gap_max: float
    ratio: float = np.nan

    @property
    def success(self):
        """Fraction of the runs that converged."""
        return self.converged / self.runs if self.runs else np.nan


def best_energies(records):
    """The lowest energy of any force call of any run, per molecule.

    Parameters
    ----------
    records : list of asebo.campaign.RunRecord

    Returns
    -------
    dict of str to float
        eV; molecules whose runs made no call are left out.
    """
    best = {}
    for record in records:
        energies = record.energies[np.isfinite(record.energies)]
        if energies.size:
            best[record.molecule] = min(best.get(record.molecule, np.inf), energies.min())
    return best


def _row(molecule, optimizer, records, best):
    calls = np.array([r.calls for r in records if r.converged], dtype=np.float64)
    gaps = np.array(
        [r.energy - best[r.molecule] for r in records if not r.failed and r.molecule in best],
        dtype=np.float64,
    )
    return SummaryRow(
        molecule=molecule,
        optimizer=optimizer,
        runs=len(records),
        converged=sum(r.converged for r in records),
        failed=sum(r.failed for r in records),
        calls_mean=calls.mean() if calls.size else np.nan,
        calls_median=np.median(calls) if calls.size else np.nan,
        calls_max=calls.max() if calls.size else np.nan,
        gap_mean=gaps.mean() if gaps.size else np.nan,
        gap_max=gaps.max() if gaps.size else np.nan,
    )


def distinct(items):
    """The distinct items in the order they first appear, as a list."""
    return list(dict.fromkeys(items))


def summarize(records, reference=REFERENCE_OPTIMIZER):
    """Summary rows per molecule and optimizer, then per optimizer over all molecules.

    Parameters
    ----------
    records : list of asebo.campaign.RunRecord
    reference : str
        The optimizer whose mean calls are the denominator of ``ratio``.

    Returns
    -------
    list of SummaryRow
        Molecules and optimizers in the order they first appear in ``records``; the
        ``'all'`` rows (pooled runs; their ratio divides pooled means) come last when
        there is more than one molecule.
    """
    best = best_energies(records)
    molecules = distinct(r.molecule for r in records)
    optimizers = distinct(r.optimizer for r in records)
    groups = [(m, [r for r in records if r.molecule == m]) for m in molecules]
    if len(molecules) > 1:
        groups.append((ALL, list(records)))
    rows = []
    for molecule, group in groups:
        block = {
            o: _row(molecule, o, [r for r in group if r.optimizer == o], best)
            for o in optimizers
            if any(r.optimizer == o for r in group)
        }
        denominator = block[reference].calls_mean if reference in block else np.nan
        for row in block.values():
            row.ratio = row.calls_mean / denominator if denominator > 0 else np.nan
        rows.extend(block.values())
    return rows


def _number(value, digits):
    return "-" if not np.isfinite(value) else f"{value:.{digits}f}"


def format_summary(rows, reference=REFERENCE_OPTIMIZER):
    """The summary as a Markdown table (readable in a terminal too).

    Parameters
    ----------
    rows : list of SummaryRow
    reference : str
        Named in the ratio column's header.

    Returns
    -------
    str
    """
    header = [
        "molecule",
        "optimizer",
        "runs",
        "converged",
        "calls mean",
        "median",
        "max",
        "ΔE mean (meV)",
        "ΔE max (meV)",
        f"calls / {reference}",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        failed = f", {row.failed} failed" if row.failed else ""
        cells = [
            row.molecule,
            row.optimizer,
            str(row.runs),
            f"{100 * row.success:.0f}%{failed}",
            _number(row.calls_mean, 1),
            _number(row.calls_median, 1),
            _number(row.calls_max, 0),
            _number(1e3 * row.gap_mean, 2),
            _number(1e3 * row.gap_max, 2),
            _number(row.ratio, 2),
        ]
        if row.molecule == ALL:
            cells[:2] = [f"**{cells[0]}**", f"**{cells[1]}**"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_legend(calc, fmax, reference=REFERENCE_OPTIMIZER):
    """What the columns of :func:`format_summary` mean, and the campaign's settings.

    Parameters
    ----------
    calc : str
        The calculator preset of the campaign.
    fmax : float
        Its force threshold, eV/Å.
    reference : str

    Returns
    -------
    str
    """
    return "\n".join(
        [
            f"Calculator {calc}; a run converges when the largest force is below {fmax:g} eV/Å.",
            "runs: perturbed starts; converged: share of runs that reached fmax in the step limit;",
            "calls mean, median, max: force calls (one energy and forces evaluation each) of "
            "the converged runs;",
            "ΔE: final energy minus the lowest energy any run found on the molecule, meV;",
            f"calls / {reference}: mean calls over {reference}'s mean calls on the same "
            "molecule(s).",
        ]
    )


def format_result(rows, reference=REFERENCE_OPTIMIZER):
    """One line that states the result: each optimizer's calls as a share of ``reference``'s.

    Parameters
    ----------
    rows : list of SummaryRow
        As :func:`summarize` returns them; the pooled rows are used when there are any.
    reference : str

    Returns
    -------
    str
        E.g. ``"Result: bo needed 0.72 of lbfgs's force calls (mean calls over all
        molecules)."``;
        empty without runs of ``reference`` or of another optimizer.
    """
    pooled = [row for row in rows if row.molecule == ALL]
    scope = "mean calls over all molecules"
    if not pooled:
        pooled = rows
        scope = f"mean calls on {rows[0].molecule}" if rows else ""
    parts = [
        f"{row.optimizer} needed {row.ratio:.2f} of {reference}'s force calls"
        for row in pooled
        if row.optimizer != reference and np.isfinite(row.ratio)
    ]
    return f"Result: {'; '.join(parts)} ({scope})." if parts else ""


def format_failures(records):
    """One line per failed run, with its error; empty when none failed."""
    return "\n".join(
        f"- {r.molecule} {r.optimizer} start {r.start} failed after {r.calls} calls: {r.error}"
        for r in records
        if r.failed
    )
