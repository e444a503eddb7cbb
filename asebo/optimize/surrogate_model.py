"""The prior and the fit of the GP of a system, shared by the optimizers.

:func:`system_prior` chooses the prior mean of a molecule or of a periodic cell from
the optimizer's ``prior`` argument, and :func:`fit_observations` fits the GP to the
observations with the representation's metric around the prior's reference, as
:class:`asebo.optimize.optimizer.BOOptimizer` and :class:`asebo.neb.BONEB` both do.
"""

from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.model.periodic import make_periodic_prior
from asebo.model.priors import AUTO, HighestEnergyPrior, automatic_prior, make_prior, resolve_prior


def system_prior(prior, system, periodic, recentre, model, representation):
    """The prior of ``system`` and the reason of ``prior='auto'`` (or None).

    Parameters
    ----------
    prior : None, str, float, ase calculator or Prior
        The optimizer's ``prior`` argument.
    system : ase.Atoms or cell filter
    periodic : bool
        A periodic cell or a cell filter: pair springs by default
        (:func:`asebo.model.periodic.make_periodic_prior`), else the molecule's priors
        (:func:`asebo.model.priors.make_prior`).
    recentre : float
        eV, the recentring of the Lindh model or of the springs.
    model : asebo.optimize.settings.ModelSettings
    representation : asebo.optimize.representations.Representation
    """
    if periodic:
        return _periodic_prior(prior, system, recentre)
    reason = None
    if isinstance(prior, str) and prior == AUTO:
        prior, reason = automatic_prior(system)
        prior = resolve_prior(prior)
    made = make_prior(
        prior, system, recentre, model.lindh_stiffness, representation.prior_by_forces
    )
    return made, reason


def _periodic_prior(prior, system, recentre):
    """The prior of a periodic ``system`` and the reason of ``prior='auto'`` (or None).

    The default pair springs need a neighbour within 10 Å; a system without (an atom
    alone in a large periodic box) takes the highest energy seen.
    """
    made, reason = make_periodic_prior(prior, system, recentre)
    try:
        made.check(GeneralizedCoordinates.from_optimizable(system).atoms)
    except ValueError as error:
        if prior is not None or "within 10" not in str(error):
            raise
        return HighestEnergyPrior(), None
    return made, reason


def fit_observations(gp, prior, representation, numbers, arrays, current):
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
    gp.fit(positions, energies, forces)
    return metric, notes
