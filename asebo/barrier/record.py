"""What :func:`asebo.barrier.transition_state` found: :class:`TransitionState`.

A transition state is verified where the saddle stage converged, the Hessian at its
end has one imaginary mode (:mod:`asebo.barrier.modes`) and a descent either way along
that mode ends at the two minima given (:mod:`asebo.barrier.connection`). Where one of
these fails, :attr:`TransitionState.code` names the first that did and
:attr:`TransitionState.reason` says why in a line.
"""

from dataclasses import dataclass, field

import ase

VERIFIED = "transition state"
"""Converged, first order, connected to the two minima."""
NOT_CONVERGED = "not converged"
"""The saddle stage ended before its forces were below ``fmax``, or at a point its
model does not put at a first-order saddle."""
NOT_FIRST_ORDER = "not first order"
"""The Hessian at the end has no imaginary mode, or more than one."""
NOT_CONNECTED = "not connected"
"""A descent along the imaginary mode ends elsewhere than at the minima given, or runs
out of its steps before a minimum."""

CODES = (VERIFIED, NOT_CONVERGED, NOT_FIRST_ORDER, NOT_CONNECTED)


@dataclass(frozen=True)
class TransitionState:
    """The transition state between two minima and how it was checked.

    Attributes
    ----------
    atoms : ase.Atoms
        The saddle point, with its computed energy and forces (a single-point
        calculator: reading them makes no call).
    forward_barrier, backward_barrier : float
        eV: the saddle point's energy above the initial and above the final minimum.
    imaginary : float or None
        cm⁻¹, the imaginary frequency (written as a positive number) of the Hessian at
        the saddle point, where it has one or more; the largest.
    first_order : bool
        The Hessian at the saddle point has exactly one imaginary mode
        (:data:`asebo.barrier.modes.IMAGINARY_THRESHOLD`).
    connected : bool
        The descents either way along that mode end one at the initial minimum, the
        other at the final one.
    code : str
        One of :data:`CODES`: :data:`VERIFIED`, else the first check that failed.
    reason : str
        One line: what was found, and where it fails, why.
    calls : dict
        Calculator calls of each stage: ``'endpoints'``, ``'band'`` (its moving
        images), ``'saddle'`` and ``'check'``.
    route : str
        How the saddle point was searched: ``'saddle search'`` (:class:`asebo.BOSaddle`
        from the band's highest image), ``'climbing image'`` (the band's, where the
        workflow does not search: one atom, no Sella), or
        ``'climbing image after the saddle search'`` (the search did not converge).
    ends : tuple of 2 str
        Where the descents along ``+mode`` and ``-mode`` ended: ``'initial'``,
        ``'final'``, ``'elsewhere'`` or ``'unfinished'`` (out of steps before a
        minimum).
    distances : tuple of 2 (tuple of 2 float or None)
        Å: the RMSD of each descent's end to the initial and to the final minimum;
        None where the calculator failed on the way down.
    band_converged, saddle_converged : bool
        Whether the band reached its loose ``band_fmax`` and the saddle stage its
        ``fmax``.
    """

    atoms: ase.Atoms
    forward_barrier: float
    backward_barrier: float
    imaginary: float | None
    first_order: bool
    connected: bool
    code: str
    reason: str
    calls: dict = field(default_factory=dict)
    route: str = ""
    ends: tuple = ()
    distances: tuple = ()
    band_converged: bool = False
    saddle_converged: bool = False

    @property
    def verified(self):
        """Converged, first order and connected: :data:`VERIFIED`."""
        return self.code == VERIFIED

    @property
    def total_calls(self):
        """Calls of every stage together."""
        return sum(self.calls.values())

    def summary(self):
        """One line: the verdict, the barriers, the imaginary frequency (where the verdict
        does not say it already) and the calls."""
        imaginary = "no imaginary mode" if self.imaginary is None else f"{self.imaginary:.0f}i cm⁻¹"
        calls = ", ".join(f"{stage} {count}" for stage, count in self.calls.items())
        barriers = f"barrier {self.forward_barrier:.3f} eV forward, "
        barriers += f"{self.backward_barrier:.3f} eV backward"
        said = "imaginary mode" in self.reason
        return "; ".join([self.reason, barriers, *([] if said else [imaginary]), f"calls: {calls}"])
