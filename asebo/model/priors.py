"""The prior mean of the GP: objects with one interface, and the names that make them.

A prior is a surface whose energy and gradient the GP corrects (R. Garijo del Río,
J. J. Mortensen and K. W. Jacobsen, Phys. Rev. B 100, 104103 (2019) give ASE's GPMin
the same shape: a ``Prior`` class per kind). :class:`Prior` is the interface:

- :meth:`Prior.energies_and_gradients`: the prior's own energies (m,) and gradients
  (m, n, 3) at configurations (m, n, 3);
- :meth:`Prior.offset`: the constant the GP adds to them, fitted to the energies
  observed;
- :meth:`Prior.for_observations`: the prior the GP takes for a sequence of
  observations (itself, except for :class:`RecentredLindh`, which rebuilds its model
  as the optimization moves);
- :meth:`Prior.metric_reference`: the configuration and Lindh model a metric of the
  kernel is built from;
- :meth:`Prior.for_hessian`: the prior of the GP whose Hessian is given as a result
  (itself, except for a Lindh model, whose bends on multiple bonds it softens);
- ``constant``, ``is_calculator`` and ``label``: what the GP and the optimizer ask
  of it.

The kinds: a constant (:class:`ConstantPrior`, :class:`HighestEnergyPrior`,
:class:`MeanEnergyPrior`), a cheap calculator whose energy and forces the GP corrects
(:class:`CalculatorPrior`: Δ-learning; Ramakrishnan et al., J. Chem. Theory Comput.
11, 2087 (2015)) and the Lindh model recentred as the run moves
(:class:`RecentredLindh`). :func:`make_prior` turns the optimizer's ``prior``
argument (a name of :data:`MODEL_PRIORS`, a number, a calculator or a prior) into one
of them; :func:`resolve_prior` turns a calculator preset's name (``'gfn1'``,
``'gpaw:mode=lcao'``, :func:`calculators.get_calculator`) into a calculator. The
calculators ``prior='auto'`` takes come from :mod:`asebo.model.prior_calculators`,
not from the presets, so that a ``calculators.py`` of the user's does not break it.
"""

from collections import OrderedDict
from numbers import Real

import numpy as np
import torch

from asebo.model.lindh import (
    BEND_CONSTANT,
    BONDED,
    STRETCH_CONSTANT,
    TORSION_CONSTANT,
    LindhModel,
    lindh_weights,
)
from asebo.model.prior_calculators import XTB_METHODS, gfn_xtb
from asebo.model.prior_names import AUTO, MODEL_PRIORS
from asebo.model.straightness import NEARLY_STRAIGHT


class PriorCalculationError(RuntimeError):
    """The prior calculator failed at a configuration, or returned NaN or inf there."""

    reason = "prior_failed"  # as recorded in the optimizer's proposals


class Prior:
    """The interface of the GP's prior mean (module docstring).

    Attributes
    ----------
    constant : bool
        The prior's gradient is zero everywhere: the GP adds no term for its curvature.
    is_calculator : bool
        A second calculator of the molecule (Δ-learning), whose surface holds far from
        the configurations computed: the optimizer takes longer default steps and gives
        the GP a random scale on its curvature.
    label : str or float
        What the optimizer's description (its ``todict``) calls it.
    """

    constant = True
    is_calculator = False
    label = None

    def energies_and_gradients(self, positions):
        """The prior's own energies (m,) and gradients (m, n, 3) at ``positions`` (m, n, 3)."""
        positions = np.asarray(positions, dtype=np.float64)
        return np.zeros(len(positions)), np.zeros_like(positions)

    def offset(self, energies, prior_energies):
        """The constant (eV) the GP adds to the prior, given the observed ``energies`` (m,)
        and the prior's own there, ``prior_energies`` (m,)."""
        raise NotImplementedError

    def for_observations(self, positions, energies, forces=None):
        """The prior the GP takes for observations ``positions`` (m, n, 3), ``energies``
        (m,) and ``forces`` (m, n, 3)."""
        return self

    def metric_reference(self):
        """Index of the observation a metric of the kernel is built around, and the
        :class:`asebo.model.lindh.LindhModel` it is built from (None: a Lindh model of
        that observation)."""
        return 0, None

    def for_hessian(self):
        """The prior of the GP whose Hessian :meth:`asebo.BOOptimizer.hessian` gives,
        refitted to the same observations: this one."""
        return self

    def check(self, atoms):
        """Raise ValueError where the prior cannot describe ``atoms``."""


class ConstantPrior(Prior):
    """A constant energy, eV.

    Parameters
    ----------
    energy : float
    """

    def __init__(self, energy):
        if isinstance(energy, bool) or not isinstance(energy, Real) or not np.isfinite(energy):
            raise ValueError(
                "prior must be an ASE calculator, 'lindh', 'max', 'mean' or a "
                f"finite number of eV, got {energy!r}"
            )
        self.energy = float(energy)
        self.label = self.energy

    def offset(self, energies, prior_energies):
        return self.energy


class HighestEnergyPrior(Prior):
    """The highest energy observed: the model falls towards what it has not seen."""

    label = "max"

    def offset(self, energies, prior_energies):
        return float(np.max(energies))


class MeanEnergyPrior(Prior):
    """The mean energy observed."""

    label = "mean"

    def offset(self, energies, prior_energies):
        return float(np.mean(energies))


class CalculatorPrior(Prior):
    """An ASE calculator as the GP's prior mean (Δ-learning, Ramakrishnan et al. 2015).

    The GP adds the mean difference of the observed and prior energies: two methods
    differ by hundreds of eV in their reference states.

    The energies and forces of the last ``cache_size`` configurations asked for are
    kept, the least recently asked dropped first: every fit asks again for those of
    every observation, while a step's search asks for 100–200 configurations once
    each, and a check at convergence for some tens more (a run of 300 steps at 100 atoms
    would otherwise keep some 200 MB).

    Parameters
    ----------
    calculator : ase.calculators.calculator.Calculator
        A cheap method (GFN1-xTB, say) whose energy and forces the GP corrects.
    atoms : ase.Atoms
        The molecule: numbers, cell and boundary conditions of every evaluation.
    cache_size : int
        Configurations whose energy and forces are kept.
    """

    constant = False
    is_calculator = True

    def __init__(self, calculator, atoms, cache_size=4096):
        self.calculator = calculator
        self.atoms = atoms.copy()
        self.atoms.constraints = []
        self.atoms.calc = calculator
        self.ncalls = 0
        self.cache_size = cache_size
        self._cache = OrderedDict()  # positions bytes -> (energy, forces (n, 3))

    @property
    def label(self):
        return type(self.calculator).__name__

    def energy_and_forces(self, positions):
        """Prior energy () and forces (n, 3) at positions (n, 3), computed once while kept."""
        key = np.asarray(positions, dtype=np.float64).tobytes()
        if key in self._cache:
            self._cache.move_to_end(key)
            energy, forces = self._cache[key]
        else:
            energy, forces = self._cache[key] = self._compute(positions)
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return energy, forces.copy()

    def energies_and_gradients(self, positions):
        values = [self.energy_and_forces(p) for p in positions]
        return np.array([v[0] for v in values]), np.stack([-v[1] for v in values])

    def offset(self, energies, prior_energies):
        # the two methods' energies differ by a large constant (reference states,
        # core electrons): the GP learns the residual around its mean
        return float(np.mean(energies - prior_energies))

    def _compute(self, positions):
        self.atoms.set_positions(positions)
        try:
            # a calculator built on PyTorch (CHGNet, say) takes its forces by autograd,
            # which a model prediction under torch.no_grad would switch off
            with torch.enable_grad():
                energy = self.atoms.get_potential_energy()
                forces = self.atoms.get_forces()
        except Exception as error:  # an SCF that does not converge, say
            raise PriorCalculationError(
                f"the prior calculator failed: {type(error).__name__}: {error}"
            ) from error
        finally:
            self.ncalls += 1
        if not (np.isfinite(energy) and np.isfinite(forces).all()):
            raise PriorCalculationError("the prior calculator returned NaN or inf energy or forces")
        return float(energy), np.array(forces, dtype=np.float64)


class ModelPrior(Prior):
    """A model of the molecule's energy as the GP's prior mean, evaluated in batches.

    The GP adds the mean difference of the observed and model energies, as for
    :class:`CalculatorPrior`; the model (:class:`asebo.model.lindh.LindhModel`) costs
    no calculator call, so nothing is cached and it takes every configuration of a
    batch in one call.

    Parameters
    ----------
    model : object with ``energies_and_gradients(positions (b, n, 3))``
        Energies (b,) and gradients (b, n, 3).
    """

    constant = False

    def __init__(self, model):
        self.model = model

    @property
    def label(self):
        return type(self.model).__name__

    def energies_and_gradients(self, positions):
        return self.model.energies_and_gradients(positions)

    offset = CalculatorPrior.offset  # the mean difference of the two energies

    def for_hessian(self):
        """The prior of the Hessian given as a result: a Lindh model with no bend stiffer
        than ``k_phi`` (:meth:`asebo.model.lindh.LindhModel.with_capped_bends`); another
        model as it is.

        Along the directions a run never moved in, the model's curvature is its prior's.
        Lindh's bend constants grow with the weights of short bonds, so the model's
        bends on double and triple bonds are stiffer than a molecule's, and put the
        modes of 1000–2500 cm⁻¹ too high; capped at ``k_phi`` they bring the zero-point
        energy nearer the target's and leave the modes above 500 cm⁻¹ as they were
        (``asebo bench vibrations``; the figures in docs/notes/minima-and-model-hessian.md,
        "Bends on multiple bonds capped for the Hessian given"). The steps and the checks
        at convergence keep the uncapped model, the one their defaults were chosen with.
        """
        if not isinstance(self.model, LindhModel):
            return self
        return ModelPrior(self.model.with_capped_bends())


class AnchoredOffset(Prior):
    """A prior whose constant is the residual of one observation, for the Hessian there.

    The GP models ``E - E_p - c`` with a stationary kernel; about the constant ``c``
    (the mean residual, :meth:`CalculatorPrior.offset`) the residual at a low
    configuration is negative, and the kernel's bump there curves every direction,
    by ``|r| / l^2`` along a unit direction of the kernel's metric for a
    squared-exponential bump of depth ``r``. The curvature a run never measured then
    comes out stiffer than the prior's. With ``c`` the residual of the configuration
    where the Hessian is taken, the bump there vanishes, and the model's frequencies
    come nearer the target's than about the mean residual (``asebo bench vibrations``;
    the figures in docs/notes/minima-and-model-hessian.md, "The kernel's bump at the
    lowest configuration, and the GP's constant").

    Parameters
    ----------
    prior : Prior
        A prior that curves (``constant`` False); everything but the offset is its.
    index : int
        The observation whose residual ``E - E_p`` is the constant.
    """

    def __init__(self, prior, index):
        self.prior = prior
        self.index = int(index)
        self.constant = prior.constant
        self.is_calculator = prior.is_calculator
        self.label = prior.label

    def energies_and_gradients(self, positions):
        return self.prior.energies_and_gradients(positions)

    def offset(self, energies, prior_energies):
        return float(np.asarray(energies)[self.index] - np.asarray(prior_energies)[self.index])


class RecentredLindh(Prior):
    """The Lindh model as the prior of a sequence of observations, recentred as they move.

    :class:`asebo.model.lindh.LindhModel` (R. Lindh, A. Bernhardsson, G. Karlström,
    P.-Å. Malmqvist, Chem. Phys. Lett. 241, 423 (1995)) is built around the first
    configuration computed and rebuilt around the lowest-energy configuration once it
    puts that configuration more than ``recentre`` eV above its minimum: a harmonic
    expansion that far from its centre says more about the start than about the way
    down. The rule is replayed over the observations in order, so a resumed run
    rebuilds the model of the uninterrupted run.

    The rebuilt model is the one a kernel's metric is built from
    (:meth:`metric_reference`). With ``prior_by_forces`` the prior takes it only where it
    fits the forces observed so far better than the prior's own model (the sum of the
    squared differences over every observation): a prior rebuilt around another
    configuration changes the residual of every observation made before it, which pays
    after a distorted start (the start's stretches far from their lengths) and not
    along a long way down the soft torsions, where the old model fits the path better
    (the internal-coordinate kernel,
    :class:`asebo.optimize.representations.InternalCoordinates`, whose linear trend
    takes up the slope of the prior's well).

    A bend ``i-j-k`` at an atom ``j`` bonded to ``i`` and ``k`` only (an sp carbon:
    acetylene, CO2, a nitrile, rattled; bonded meaning ``rho > BONDED``) wider than
    ``NEARLY_STRAIGHT.straight_reference`` (150°,
    :mod:`asebo.model.straightness`) is given the straight angle as reference: its
    angle moves away from 180° as ``|p|``, the displacement across the axis, so a
    harmonic term around a reference of, say, 172° has a cusp at the straight
    geometry (``(180° - 172° - c|p|)^2``), which no smooth GP can correct, while
    ``(c|p|)^2`` is smooth.

    The force constants are ``stiffness`` (0.7) times those of the model: a softer
    model takes longer first steps. The default was chosen side by side with GFN2-xTB
    and the internal-coordinate kernel on the Baker, drug-like and rough sets and the
    rattled G2 molecules (``asebo bench baker``, ``druglike``, ``druglike2``,
    ``druglike3``, ``rough``, ``g2``; the calls of each stiffness in
    docs/notes/lindh-stiffness.md).

    A saddle search's prior (``reaction_pairs``) reverses the stretches of the bonds
    being made or broken at its guess (:func:`asebo.optimize.bonding.partial_bonds`):
    each is a harmonic maximum of the prior
    (:meth:`asebo.model.lindh.LindhModel.with_reversed_stretches`), so that before any
    call the model's lowest mode is the reaction's, not a torsion. Reversed along two
    bonds that share a transferred atom, the lowest mode moves that atom from one to
    the other. The kernel's metric keeps the model's own stretches.

    Parameters
    ----------
    atoms : ase.Atoms
        The molecule (numbers, cell) the prior evaluates.
    recentre : float
        Energy above the model's minimum, eV, beyond which the model is rebuilt.
    stiffness : float
        The force constants relative to Lindh's (and twice his torsion constant).
    prior_by_forces : bool
        Whether the prior takes a rebuilt model only where it fits the observed forces
        better (True), or always (False).
    reaction_pairs : sequence of (int, int)
        Atom pairs ``(i, j)``, ``i < j``, whose stretches the prior reverses; none by
        default.

    Attributes
    ----------
    model : LindhModel or None
        The current model, once an observation exists.
    centre : int or None
        Index of the observation the model is built around.
    """

    label = "lindh"

    def __init__(self, atoms, recentre, stiffness=0.7, prior_by_forces=False, reaction_pairs=()):
        self.atoms = atoms
        self.numbers = atoms.get_atomic_numbers()
        self.recentre = recentre
        self.stiffness = stiffness
        self.prior_by_forces = prior_by_forces
        self.reaction_pairs = tuple(reaction_pairs)
        self.model = None
        self.centre = None
        self._prior = None
        self._seen = 0  # observations the rule has been replayed over

    def check(self, atoms):
        if np.any(atoms.pbc):
            raise ValueError(
                "the Lindh model prior knows the bonds of a molecule, not those "
                "across a periodic cell: use prior='max' (the default for "
                "periodic atoms) or a calculator"
            )

    def for_observations(self, positions, energies, forces=None):
        """The prior for observations ``positions`` (m, n, 3), ``energies`` (m,) and
        ``forces`` (m, n, 3; needed with ``prior_by_forces``).

        A :class:`ModelPrior` of a model, or a :class:`HighestEnergyPrior` when no
        two atoms are bonded (the model would be zero; the constant prior is better).
        """
        if self.prior_by_forces and forces is None:
            raise ValueError("a prior chosen by the forces needs the observed forces")
        while self._seen < len(energies):
            self._seen += 1
            best = int(np.argmin(energies[: self._seen]))
            if self.model is None:
                self._build(positions, 0)
                self._prior = self._model_prior(self.model)
            elif self.model.energy_and_forces(positions[best])[0] > self.recentre:
                self._build(positions, best)
                seen = slice(0, self._seen)
                if not self.prior_by_forces or self._fits_better(positions[seen], forces[seen]):
                    self._prior = self._model_prior(self.model)
        return self._prior

    def _fits_better(self, positions, forces):
        """Whether the model fits ``forces`` (k, n, 3) observed at ``positions`` (k, n, 3)
        better than the prior's own model (or the prior has none)."""

        def misfit(model):
            return float(((forces + model.energies_and_gradients(positions)[1]) ** 2).sum())

        kept = getattr(self._prior, "model", None)
        return kept is None or misfit(self._reversed(self.model)) < misfit(kept)

    def metric_reference(self):
        return self.centre, self.model

    def _build(self, positions, index):
        bonded = lindh_weights(positions[index], self.numbers) > BONDED  # (n, n)
        self.model = LindhModel(
            positions[index],
            self.numbers,
            stretch_constant=self.stiffness * STRETCH_CONSTANT,
            bend_constant=self.stiffness * BEND_CONSTANT,
            torsion_constant=self.stiffness * TORSION_CONSTANT,
            reference_angles=lambda bends, angles: _straightened(bonded, bends, angles),
        )
        self.centre = index

    def _reversed(self, model):
        """``model`` reversed along :attr:`reaction_pairs`, or as it is where none."""
        if not self.reaction_pairs:
            return model
        return model.with_reversed_stretches(self.reaction_pairs)

    def _model_prior(self, model):
        """The prior of ``model``: its :meth:`_reversed` model, or the highest energy
        where no two atoms are bonded."""
        if len(model.stretches) == 0:
            return HighestEnergyPrior()
        return ModelPrior(self._reversed(model))


def _straightened(bonded, bends, angles):
    """Reference angles ``angles`` (b,) of ``bends`` (b, 3), with the near-straight
    bends of two-coordinated atoms (``bonded`` (n, n)) set to 180 degrees, and the
    bends folded across such an atom (at an end bonded to it, between that bond and
    the 1-3 pair through it, as at an oxygen of CO2) set to 0 degrees: a reference a
    few degrees off either end is a cusp at the straight geometry."""
    i, j, k = bends.T  # (b,) each
    two_bonds = bonded[i, j] & bonded[j, k] & (bonded.sum(axis=1)[j] == 2)
    straight = two_bonds & (angles > NEARLY_STRAIGHT.straight_reference)
    through = {(min(a, c), b, max(a, c)) for a, b, c in bends[straight].tolist()}
    folded = np.array(
        [
            (bonded[b, a] and (min(b, c), a, max(b, c)) in through)
            or (bonded[b, c] and (min(a, b), c, max(a, b)) in through)
            for a, b, c in bends.tolist()
        ],
        dtype=bool,
    )  # (b,)
    return np.where(straight, np.pi, np.where(folded, 0.0, angles))


def resolve_prior(prior, target=None):
    """The ``prior`` argument of :class:`asebo.BOOptimizer` for a name, number or calculator.

    Parameters
    ----------
    prior : None, str, float or ase calculator
        None (the optimizer's default), a name of :data:`MODEL_PRIORS`, a number, a
        calculator preset (``'gfn1'``, ``'gpaw:mode=lcao'``) or a calculator.
    target : ase calculator, optional
        The calculator of the run: a GFN-xTB preset that sets no charge or multiplicity
        of its own takes the target's
        (:func:`asebo.model.default_prior.target_charge`), to describe the same ion or
        radical, as the default prior does.

    Returns
    -------
    None, str, float or ase calculator
        ``prior`` itself, except that a preset name becomes a fresh calculator.

    Raises
    ------
    ValueError
        For a string that is neither a model prior nor a calculator preset.
    """
    if not isinstance(prior, str):
        if isinstance(prior, Real) and not isinstance(prior, bool):
            return float(prior)
        return prior
    if prior in MODEL_PRIORS or prior == AUTO:
        return prior
    from asebo.model.default_prior import target_charge

    charge = {} if target is None else target_charge(target)
    if prior in XTB_METHODS:  # what prior='auto' takes: built without the presets
        return gfn_xtb(XTB_METHODS[prior], **charge)
    from calculators import get_calculator
    from calculators.presets import parse_preset

    try:
        name, options = parse_preset(prior)
        return get_calculator(name, **{**(charge if name in XTB_METHODS else {}), **options})
    except ValueError as error:
        raise ValueError(
            f"unknown prior {prior!r}: use one of {', '.join(MODEL_PRIORS)}, a "
            f"number, or a calculator preset ({error})"
        ) from None


def constant_prior(prior):
    """The :class:`Prior` of ``'max'``, ``'mean'``, a number, or ``prior`` itself."""
    if isinstance(prior, Prior):
        return prior
    if isinstance(prior, str):
        constants = {"max": HighestEnergyPrior, "mean": MeanEnergyPrior}
        if prior not in constants:
            raise ValueError(
                f"prior must be 'max', 'mean', a number or a Prior object, got {prior!r}"
            )
        return constants[prior]()
    return ConstantPrior(prior)


def make_prior(prior, atoms, recentre, stiffness=0.7, prior_by_forces=False, reaction_pairs=()):
    """The :class:`Prior` of the optimizer's ``prior`` argument for ``atoms``.

    Parameters
    ----------
    prior : None, str, float, ase calculator or Prior
        None: ``'lindh'`` for a molecule, ``'max'`` for a periodic cell. A name of
        :data:`MODEL_PRIORS`, a number (eV), a calculator (:class:`CalculatorPrior`) or
        a prior object, taken as it is.
    atoms : ase.Atoms
    recentre, stiffness : float
        Of :class:`RecentredLindh`, for ``'lindh'``.
    prior_by_forces : bool
        Of :class:`RecentredLindh`, for ``'lindh'``.
    reaction_pairs : sequence of (int, int)
        Of :class:`RecentredLindh`, for ``'lindh'``: the stretches it reverses (a saddle
        search's bonds being made or broken).

    Raises
    ------
    ValueError
        For another name, a number that is not finite, or a prior that cannot describe
        ``atoms`` (the Lindh model of a periodic cell).
    """
    if hasattr(prior, "get_potential_energy") or hasattr(prior, "calculate"):
        return CalculatorPrior(prior, atoms)
    if prior is None:
        prior = "max" if np.any(atoms.pbc) else "lindh"
    if isinstance(prior, str) and prior not in MODEL_PRIORS:
        raise ValueError(
            f"prior must be an ASE calculator, {', '.join(MODEL_PRIORS)} or a number, got {prior!r}"
        )
    made = (
        RecentredLindh(atoms, recentre, stiffness, prior_by_forces, reaction_pairs)
        if prior == "lindh"
        else constant_prior(prior)
    )
    made.check(atoms)
    return made
