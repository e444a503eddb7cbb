"""Whether a calculator's energies agree with its forces, checked on each step.

The GP models one surface from energies and forces together and assumes the forces
are its negative gradient. Between two configurations ``a`` and ``b`` the energy
change then equals the work of the forces along the straight segment; the trapezoid
rule ``W = -(f_a + f_b) . (x_b - x_a) / 2`` gives it exactly on a quadratic surface
and to third order in the step otherwise. A calculator whose energies and forces
disagree (a plane-wave cutoff too low for the stress, so that the energy jumps as
plane waves enter the basis; an SCF converged loosely; a grid's egg-box ripple)
leaves the model nothing consistent to fit: the run crawls, and only the user can
fix the cause.

A long step on an anharmonic surface also leaves a mismatch: on a cubic
``E(s) = c s^3`` it is a sixth of ``|(f_b - f_a) . (x_b - x_a)|``, the change of the
forces along the step. A mismatch is reported only where it exceeds half of that as
well: an energy that jumps while the forces hardly change. A step long enough to cross
a torsion's barrier can still leave a mismatch that neither term explains (the forces
along it rise and fall within it, and the same at both ends); a calculator that
disagrees with itself does so on every step, so the log says so only after
:data:`STEPS_IN_A_ROW` steps in a row that mismatch (:class:`MismatchNote`).
"""

import numpy as np

ABSOLUTE = 0.02
"""eV: a mismatch below this is never reported."""

RELATIVE = 0.3
"""A mismatch is reported above this fraction of ``|ΔE| + |W|``: above what a consistent
calculator's steps leave, below an energy that jumps with a plane-wave basis (the
fractions of both in docs/notes/warm-starts-and-ase-tests.md, "A calculator whose
energies and forces disagree")."""

CURVATURE = 0.5
"""A mismatch is reported above this fraction of the forces' change along the step,
``|(f_b - f_a) . (x_b - x_a)|``: three times the sixth a cubic surface leaves (the
ratio of a calculator that disagrees in docs/notes/warm-starts-and-ase-tests.md)."""


STEPS_IN_A_ROW = 2
"""Steps in a row whose energy change disagrees with the forces' work before the log
says so (:class:`MismatchNote`)."""


def energy_force_mismatch(positions, energies, forces):
    """A note when the last step's energy change disagrees with its forces' work.

    The step is the one from the lowest-energy configuration before the last (where
    the optimizer's trust region was centred) to the last.

    Parameters
    ----------
    positions, forces : array (m, N, 3), or lists of m arrays (N, 3)
    energies : array (m,) or list

    Returns
    -------
    str or None
        The note for the log, None where they agree (or m < 2).
    """
    if len(energies) < 2:
        return None
    start = int(np.argmin(energies[:-1]))
    step = positions[-1] - positions[start]  # (N, 3)
    work = -0.5 * float(np.sum((forces[start] + forces[-1]) * step))
    bending = abs(float(np.sum((forces[-1] - forces[start]) * step)))
    change = float(energies[-1] - energies[start])
    mismatch = abs(change - work)
    if (
        mismatch <= ABSOLUTE
        or mismatch <= RELATIVE * (abs(change) + abs(work))
        or mismatch <= CURVATURE * bending
    ):
        return None
    return (
        f"the energy changed by {change:+.3f} eV from configuration {start} to "
        f"{len(energies) - 1}, where the forces' work along the step gives {work:+.3f} eV: "
        "the calculator's energies and forces disagree (a plane-wave cutoff too low for "
        "the stress, an SCF converged loosely, a grid's egg-box ripple), and the model "
        "assumes they agree: check the calculator's settings"
    )


class MismatchNote:
    """:func:`energy_force_mismatch`'s note, said once a run, after
    :data:`STEPS_IN_A_ROW` steps in a row that mismatch."""

    def __init__(self):
        self.said = False
        self.in_a_row = 0

    def notes(self, record):
        """The note of ``record``'s last step as a list: empty where the energies agree
        with the forces, where the steps before it did not mismatch too, or once said.

        Parameters
        ----------
        record : asebo.optimize.observations.Observations
            Its lists are read: no (m, N, 3) copy each step.
        """
        if self.said:
            return []
        note = energy_force_mismatch(record.positions, record.energies, record.forces)
        self.in_a_row = 0 if note is None else self.in_a_row + 1
        if self.in_a_row < STEPS_IN_A_ROW:
            return []
        self.said = True
        return [f"{note} (said once)"]
