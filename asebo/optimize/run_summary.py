"""One line that says how a driver's run ended: ``summary()`` of :class:`asebo.BOOptimizer`
(:class:`MinimumSummary`), :class:`asebo.neb.BONEB` (:class:`BandSummary`) and
:class:`asebo.saddle.BOSaddle` (:class:`SaddleSummary`), the line the ``asebo optimize``,
``asebo neb`` and ``asebo saddle`` commands print at the end.

Every line reads ``converged after S steps, C calls; ...`` or ``not converged after S
steps, C calls (why); ...``, then what the run found (the energy, the barrier, the
saddle point's imaginary frequency) and its largest force, read from the run's record:
no calculator call.
"""

import numpy as np

NOT_RUN = "not run yet: call run(fmax=...) first"
"""The summary of a driver before its first ``run``."""


class RunSummary:
    """``summary()``: a mixin of a driver that defines :meth:`_summary_parts` and has
    ASE's ``fmax`` (None before a run) and ``nsteps``."""

    def summary(self):
        """How the run ended, in one line: converged or why not, the steps and the
        calculator's calls, what it found and its largest force (eV/Å).

        Returns
        -------
        str
            ``'converged after N steps, M calls; energy E eV, fmax F eV/Å'``;
            :data:`NOT_RUN` before ``run``.
        """
        if self.fmax is None:
            return NOT_RUN
        converged, calls, why_not, found, fmax = self._summary_parts()
        steps = f"{self.nsteps} step{'' if self.nsteps == 1 else 's'}"
        head = f"{'converged' if converged else 'not converged'} after {steps}, {calls} calls"
        reason = "" if converged else f" ({why_not})"
        return f"{head}{reason}; {found}, fmax {fmax:.4f} eV/Å"

    def _summary_parts(self):
        """(converged, calls, why not converged, what was found, largest force)."""
        raise NotImplementedError


class MinimumSummary(RunSummary):
    """The summary of :class:`asebo.BOOptimizer`: the calls are every configuration
    computed (``len(energies)``) less those a warm start gave (the record's
    ``warm_start``), what it found the energy where it stands."""

    def _summary_parts(self):
        gradient = self.optimizable.get_gradient()
        converged = self.gradient_converged(gradient)
        forces_below = self.optimizable.converged(gradient, self.fmax)
        why_not = (
            "its forces are below fmax, but the checks at convergence go on: the log says why"
            if forces_below
            else "its forces are above fmax"
        )
        found = f"energy {self.optimizable.get_value():.6f} eV"
        fmax = self.optimizable.gradient_norm(gradient)
        calls = len(self.energies) - self.observations.state.get("warm_start", 0)
        return converged, calls, why_not, found, fmax


class BandSummary(RunSummary):
    """The summary of :class:`asebo.neb.BONEB`: the calls are the moving images' (the
    endpoints' not counted, as the benchmarks count them), what it found the barrier,
    the highest image's energy above the first endpoint's, and the band's largest NEB
    force."""

    def _summary_parts(self):
        state = self.band_state()
        last = len(self.images) - 1
        calls = sum(1 for image in self.record.image_of if image not in (0, last))
        converged = self.gradient_converged(None)
        missing = int((~np.asarray(state.computed[1:-1], dtype=bool)).sum())
        why_not = (
            f"moving images not computed at their place: {missing}"
            if missing
            else "its NEB forces are above fmax"
        )
        energies = np.asarray(state.energies)  # (i,)
        found = f"barrier {energies.max() - energies[0]:.4f} eV at image {int(energies.argmax())}"
        fmax = float(np.sqrt((state.band_forces**2).sum(axis=2)).max())
        return converged, calls, why_not, found, fmax


class SaddleSummary(RunSummary):
    """The summary of :class:`asebo.saddle.BOSaddle`: the calls are those of the search
    (observations given to it, a band's, not counted), what it found its
    :attr:`asebo.saddle.BOSaddle.result` with the energy where it stands and the model's
    imaginary frequency there."""

    def _summary_parts(self):
        result = self.result
        index = self.observations.find(self.atoms.positions)
        if index is None:  # not computed where it stands: the latest computed
            index = len(self.observations) - 1
        forces = self._free_forces(index)  # (n, 3)
        calls = len(self.observations) - len(self._given[1])
        found = f"energy {self.observations.energies[index]:.6f} eV"
        if result.imaginary is not None:
            found += f", imaginary frequency {result.imaginary:.0f}i cm⁻¹"
        if result.converged:
            found = f"{saddle_end(result.reason)}; {found}"
        why_not = saddle_end(result.reason)
        fmax = float(np.sqrt((forces**2).sum(axis=1)).max())
        return result.converged, calls, why_not, found, fmax


def saddle_end(reason):
    """The words of a :attr:`asebo.saddle.result.SaddleResult.reason`."""
    from asebo.saddle import result  # the saddle search imports this package
    from asebo.saddle.order import FLAT_CURVATURE

    words = {
        result.FIRST_ORDER: "a first-order saddle point by the model",
        result.MINIMUM: "the forces converged at a minimum of the model",
        result.FLAT: "the forces converged where the model is flat, its one negative "
        f"curvature softer than {FLAT_CURVATURE:.1e} eV/Å²",
        result.HIGHER_ORDER: "the forces converged at a saddle point of higher order of the model",
        result.STEPS: "its steps ran out",
        result.WALK_FAILED: "the walk on the model failed at its first step",
        result.WALK_ON_COMPUTED: "the walk on the model ended on a configuration already computed",
        result.ORDER_UNKNOWN: "the forces converged where the prior calculator fails to give "
        "the model's Hessian: the order is not known",
    }
    return words[reason]
