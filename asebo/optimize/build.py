"""The engine of :class:`asebo.BOOptimizer` built for a system: its representation,
prior, settings and GP, with the log's notes on the choices made."""

import numpy as np

from asebo.model.gp import EnergyForceGP
from asebo.optimize.engine import Engine
from asebo.optimize.representations import make_representation
from asebo.optimize.resolve import resolve_recentre, resolve_settings
from asebo.optimize.settings import ModelSettings
from asebo.optimize.subspace import free_coordinates, free_subspace, search_subspace
from asebo.optimize.surrogate_model import Surrogate, system_prior


def engine_coordinates(coordinates):
    """The coordinates of a system as :class:`asebo.optimize.engine.Engine` takes them.

    Parameters
    ----------
    coordinates : asebo.model.cell_coordinates.GeneralizedCoordinates
        Of the atoms, or of a cell filter.

    Returns
    -------
    dict
        ``numbers`` (N,), a filter's cell rows counted as atoms of number 0; ``free``
        (N, 3), what no constraint holds whole
        (:func:`asebo.optimize.subspace.free_coordinates`); ``subspace``, the moves
        of the search: what the other constraints allow, a cell filter's deformation
        kept symmetric (:func:`asebo.optimize.subspace.search_subspace`);
        ``periodic`` and ``cell`` (a cell filter's), bools; ``allowed``, what the
        constraints allow, a cell filter's turns included
        (:func:`asebo.optimize.subspace.free_subspace`): the convergence test's
        projection, and the free coordinates that choose the default ``kappa``.
    """
    constrained = coordinates.atoms  # the atoms behind a filter, or atoms
    free = free_coordinates(coordinates)  # (N, 3)
    cell_rows = np.zeros(coordinates.rows - len(constrained))
    return {
        "numbers": np.concatenate([constrained.get_atomic_numbers(), cell_rows]).astype(int),
        "free": free,
        "subspace": search_subspace(coordinates, free),
        "periodic": coordinates.has_cell or bool(np.any(constrained.pbc)),
        "cell": coordinates.has_cell,
        "allowed": free_subspace(coordinates, free),
    }


def build_engine(
    system, coordinates, prior=None, kernel=None, shortcuts=None, threads=None, **settings
):
    """The :class:`asebo.optimize.engine.Engine` of ``system``, and notes for the log.

    Parameters
    ----------
    system : ase.Atoms or cell filter
    coordinates : dict
        ``numbers`` (N,), ``free`` (N, 3), ``subspace``, ``periodic`` and ``cell``: the
        system's coordinates as :class:`asebo.optimize.engine.Engine` takes them, and
        ``allowed`` (:func:`engine_coordinates`).
    prior, kernel : optional
        As for :class:`asebo.BOOptimizer`.
    shortcuts : dict, optional
        The optimizer's ``kappa``, ``maxstep``, ``trust_radius`` and ``recentre``
        (:data:`asebo.optimize.resolve.SHORTCUTS`).
    threads : int, optional
        The optimizer's threads, those of a default GFN-xTB prior's calls.
    **settings
        ``search``, ``trust_region``, ``model``, ``special_cases``, ``rules`` and the
        shortcut ``gp_options``: as :func:`asebo.optimize.resolve.resolve_settings`
        takes them.

    Returns
    -------
    engine : asebo.optimize.engine.Engine
    notes : list of str
        The prior chosen where ``prior`` was None or ``'auto'``, and a pessimistic
        ``kappa`` chosen by the number of free coordinates.

    Raises ValueError for a kernel, prior or setting the system cannot take.
    """
    coordinates = dict(coordinates)
    allowed = coordinates.pop("allowed")
    dimension = int(coordinates["free"].sum()) if allowed is None else allowed.dimension
    surrogate, resolved, reason = build_surrogate(
        system, coordinates, dimension, prior, kernel, shortcuts, threads=threads, **settings
    )
    engine = Engine(surrogate, settings=resolved, **coordinates)
    notes = [] if reason is None else [reason]
    search = settings.get("search")
    given = shortcuts.get("kappa") is not None or (search is not None and search.kappa is not None)
    return engine, notes + _kappa_note(resolved.search, dimension, given)


def build_surrogate(
    system,
    coordinates,
    dimension,
    prior=None,
    kernel=None,
    shortcuts=None,
    driver="minimum",
    threads=None,
    **settings,
):
    """The :class:`asebo.optimize.surrogate_model.Surrogate` of ``system`` and the
    settings resolved with it: the one resolution of :class:`asebo.BOOptimizer`,
    :class:`asebo.neb.BONEB` and :class:`asebo.saddle.BOSaddle`.

    Parameters
    ----------
    system : ase.Atoms or cell filter
    coordinates : dict
        ``numbers`` (N,) and ``periodic`` (:func:`engine_coordinates`).
    dimension : int
        The coordinates the constraints leave free: they choose the default ``kappa``.
    prior, kernel, shortcuts, **settings
        As :func:`build_engine` takes them.
    driver : str
        ``'minimum'``, ``'band'`` or ``'saddle'``: the default prior's
        (:func:`asebo.model.default_prior.default_prior`).
    threads : int, optional
        The driver's threads, those of a default GFN-xTB prior's calls.

    Returns
    -------
    surrogate : asebo.optimize.surrogate_model.Surrogate
    settings : asebo.optimize.settings.Settings
    reason : str or None
        The log's line on the prior chosen where ``prior`` was None or ``'auto'``.
    """
    shortcuts = dict(shortcuts or {})
    model = settings.get("model") or ModelSettings()
    representation = make_representation(kernel, system)
    recentre = resolve_recentre(shortcuts.get("recentre"), model, representation)
    made, reason = system_prior(
        prior, system, coordinates["periodic"], recentre, model, representation, driver, threads
    )
    resolved = resolve_settings(
        representation,
        made.is_calculator,
        dimension,
        **shortcuts,
        **{**settings, "model": model},
    )
    gp = _gp(representation, resolved.model)  # bad options fail here, before any call
    surrogate = Surrogate(gp, made, representation, coordinates["numbers"])
    return surrogate, resolved, reason


def _kappa_note(search, dimension, given):
    """The log's line on a pessimistic ``kappa`` chosen by the ``dimension`` free
    coordinates, in a list; empty where ``kappa`` was ``given`` or is not negative."""
    if given or search.kappa >= 0:
        return []
    return [
        f"kappa={search.kappa:g}: {dimension} free coordinates"
        f" ({search.pessimistic_from} or more: a pessimistic bound)"
    ]


def _gp(representation, model):
    """The :class:`asebo.model.gp.EnergyForceGP` of the resolved ``model`` settings and
    ``representation``; its prior is set at each fit."""
    return EnergyForceGP(
        trend=model.trend,
        prior_curvature=model.prior_curvature,
        **_gp_kernel_options(representation, model.gp_options),
    )


def _gp_kernel_options(representation, gp_options):
    """``gp_options`` with the GP's kernel object of ``representation``.

    ``proper`` and ``radial`` of ``gp_options`` build that object
    (:meth:`asebo.optimize.representations.Representation.gp_kernel`); a ``kernel``
    there replaces it.
    """
    options = dict(gp_options or {})
    if "kernel" not in options:
        given = {name: options.pop(name) for name in ("proper", "radial") if name in options}
        options["kernel"] = representation.gp_kernel(**given)
    return options
