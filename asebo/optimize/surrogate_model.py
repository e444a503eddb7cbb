"""The prior and the fit of the GP of a system, shared by the optimizers.

:func:`system_prior` chooses the prior mean of a molecule or of a periodic cell from
the optimizer's ``prior`` argument, and :func:`fit_observations` fits the GP to the
observations with the representation's metric around the prior's reference, once per
observation (:class:`Surrogate`), for :class:`asebo.optimize.optimizer.BOOptimizer`,
:class:`asebo.neb.BONEB` and :class:`asebo.saddle.BOSaddle` alike; where the record
names a map of the crystal (``crystal_map``), with each observation's image under it
(:func:`with_images`).
"""

import copy

import numpy as np

from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.model.default_prior import default_prior
from asebo.model.periodic import make_periodic_prior
from asebo.model.priors import AUTO, HighestEnergyPrior, make_prior
from asebo.model.springs import NoNeighboursError
from asebo.optimize.bonding import partial_bonds
from asebo.optimize.crystal_symmetry import TOLERANCE, CrystalMap


def system_prior(
    prior, system, periodic, recentre, model, representation, driver="minimum", threads=None
):
    """The prior of ``system`` and why it was chosen where ``prior`` was None or
    ``'auto'`` (else None).

    Parameters
    ----------
    prior : None, str, float, ase calculator or Prior
        The driver's ``prior`` argument: None takes the one default
        (:func:`asebo.model.default_prior.default_prior`), ``'auto'`` a calculator prior
        wherever one applies.
    system : ase.Atoms or cell filter
    periodic : bool
        A periodic cell or a cell filter: pair springs by default
        (:func:`asebo.model.periodic.make_periodic_prior`), else the molecule's priors
        (:func:`asebo.model.priors.make_prior`).
    recentre : float
        eV, the recentring of the Lindh model or of the springs.
    model : asebo.optimize.settings.ModelSettings
    representation : asebo.optimize.representations.Representation
    driver : str
        ``'minimum'``, ``'band'`` or ``'saddle'`` (:data:`asebo.model.default_prior.DRIVERS`);
        a saddle search's Lindh model is reversed along the bonds being made or broken
        at ``system``, its guess (:func:`asebo.optimize.bonding.partial_bonds`).
    threads : int, optional
        The driver's threads, those of a default GFN-xTB prior's calls.
    """
    given = prior is not None
    reason = None
    automatic = isinstance(prior, str) and prior == AUTO
    if prior is None or (automatic and not periodic):
        atoms = GeneralizedCoordinates.from_optimizable(system).atoms if periodic else system
        choice = default_prior(atoms, driver, periodic, any_target=automatic, threads=threads)
        label = f"prior={AUTO!r}" if automatic else "prior"
        prior, reason = choice.prior, f"{label}: {choice.reason}"
        reason = None if periodic else reason  # a periodic run's own note names its prior
    if periodic:
        made, why = _periodic_prior(prior, system, recentre, given)
        return made, reason or why
    reaction = partial_bonds(system.numbers, system.positions) if driver == "saddle" else ()
    made = make_prior(
        prior, system, recentre, model.lindh_stiffness, representation.prior_by_forces, reaction
    )
    return made, reason


def _periodic_prior(prior, system, recentre, given):
    """The prior of a periodic ``system`` and the reason of ``prior='auto'`` (or None).

    The default pair springs need a neighbour within 10 Å; a system without (an atom
    alone in a large periodic box) takes the highest energy seen unless the springs were
    ``given``.
    """
    made, reason = make_periodic_prior(prior, system, recentre)
    try:
        made.check(GeneralizedCoordinates.from_optimizable(system).atoms)
    except NoNeighboursError:
        if given:
            raise
        return HighestEnergyPrior(), None
    return made, None if reason is None else f"prior='auto': {reason}"


def fit_observations(gp, prior, representation, numbers, arrays, current, near=None):
    """Fit ``gp`` to the observations with ``prior`` and the representation's metric.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted in place: its prior and metric are set.
    prior : asebo.model.priors.Prior
        Its :meth:`~asebo.model.priors.Prior.for_observations` is the GP's prior and its
        :meth:`~asebo.model.priors.Prior.metric_reference` the metric's centre.
    representation : asebo.optimize.representations.Representation
    numbers : array (n,)
    arrays : (positions (m, n, 3), energies (m,), forces (m, n, 3))
    current : (int, metric) or None
        The metric of the last fit, kept while still valid.
    near : sequence of int, optional
        The observations near which the GP is asked next: its ``centre``
        (:meth:`asebo.model.gp.EnergyForceGP.fit`).

    Returns
    -------
    metric : (int, metric) or None
        The metric and its centre, for the next fit.
    notes : tuple of str
        Lines for the log.
    """
    positions, energies, forces = arrays
    gp.prior = prior.for_observations(positions, energies, forces)
    centre, model = prior.metric_reference()
    metric, notes = representation.metric(positions, numbers, centre, model, current)
    if metric is not None:
        gp.metric = metric[1]
    gp.fit(positions, energies, forces, centre=near)
    return metric, notes


def with_images(arrays, crystal_map):
    """The observations ``arrays`` (positions (m, n, 3), energies (m,), forces (m, n, 3))
    followed by their images under ``crystal_map`` (the state of a
    :class:`asebo.optimize.crystal_symmetry.CrystalMap`: the same energies, the forces
    turned), each observation keeping its index; ``arrays`` alone where None. An image
    within the map's tolerance of a configuration observed (its own, where the map
    keeps it in place) is that configuration: none is added for it."""
    if crystal_map is None:
        return arrays
    positions, energies, forces = (np.asarray(values, dtype=float) for values in arrays)
    images, image_forces = CrystalMap.from_state(crystal_map).images(positions, forces)
    apart = np.array([_nearest(image, positions) > TOLERANCE for image in images])  # (m,)
    return (
        np.concatenate([positions, images[apart]]),
        np.concatenate([energies, energies[apart]]),
        np.concatenate([forces, image_forces[apart]]),
    )


def _nearest(configuration, positions):
    """Å: the largest atomic distance of ``configuration`` (n, 3) from the nearest of
    ``positions`` (m, n, 3)."""
    return float(np.linalg.norm(positions - configuration, axis=-1).max(axis=-1).min())


class Surrogate:
    """The GP of one run with its prior and representation, fitted once per observation:
    the one fit cache of :class:`asebo.optimize.engine.Engine`, :class:`asebo.neb.BONEB`
    and :class:`asebo.saddle.BOSaddle`.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Not yet fitted; refitted in place after each new observation. One GP across
        steps: it keeps the kernel structure of the configurations seen.
    prior : asebo.model.priors.Prior
    representation : asebo.optimize.representations.Representation
    numbers : array (N,) of int
    """

    def __init__(self, gp, prior, representation, numbers):
        self.gp, self.prior, self.representation = gp, prior, representation
        self.numbers = np.asarray(numbers)
        self._metric = None  # (centre, metric) of the representation, from the last fit
        self._last_fit = None  # (observations counted, notes) of the last fit
        self._unfitted = copy.deepcopy(gp)  # its settings, for fitted_alone

    def fitted(self, observations, near=None):
        """The GP fitted to every observation (again only after a new one), and notes
        for the log (:func:`fit_observations`).

        Parameters
        ----------
        observations : asebo.optimize.observations.Observations
        near : sequence of int, optional
            The observations near which the GP is asked next, where a new fit is made.
        """
        seen = len(observations)
        if self._last_fit is None or self._last_fit[0] != seen:
            self._metric, notes = fit_observations(
                self.gp,
                self.prior,
                self.representation,
                self.numbers,
                with_images(observations.arrays(), observations.state.get("crystal_map")),
                self._metric,
                near,
            )
            self._last_fit = (seen, notes)
        return self.gp, self._last_fit[1]

    def fitted_alone(self, arrays):
        """A GP of the same settings, prior and representation fitted to ``arrays``
        alone (positions (k, N, 3), energies (k,), forces (k, N, 3)): the model of an
        earlier step of the run, the run's own GP and its fit left as they are."""
        gp = copy.deepcopy(self._unfitted)
        fit_observations(gp, self.prior, self.representation, self.numbers, arrays, None)
        return gp
