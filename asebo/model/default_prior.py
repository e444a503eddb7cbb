"""The one default prior of :class:`asebo.BOOptimizer`, :class:`asebo.neb.BONEB` and
:class:`asebo.saddle.BOSaddle`: ``prior=None`` for any of the three.

A cheap method that describes the system becomes the prior mean where the target is an
electronic-structure code: the GP then learns the difference between the two
(Δ-learning: R. Ramakrishnan, P. O. Dral, M. Rupp and O. A. von Lilienfeld, J. Chem.
Theory Comput. 11, 2087 (2015)), and each target call costs far more than the prior's
calls in the search on the model. A band and a saddle search take it under any target
but tblite, since across a barrier a model prior is far off; a minimisation under
another target takes the Lindh model, and a periodic cell the pair springs.
:data:`POLICY` is the whole rule, by system and driver; :func:`default_prior`
applies it and says why, as a record (:class:`PriorChoice`).
"""

import importlib.util
from dataclasses import dataclass

import numpy as np

DRIVERS = ("minimum", "band", "saddle")
"""The drivers, by what they search: :class:`asebo.BOOptimizer`, :class:`asebo.neb.BONEB`,
:class:`asebo.saddle.BOSaddle`."""

MODEL_PRIOR = {"minimum": "lindh", "band": "max", "saddle": "lindh"}
"""The prior of a molecule that needs no calculator, by driver: the Lindh model Hessian's
harmonic energy for a minimum and a saddle point's walk from a guess, the highest energy
computed for a band (it leaves the harmonic well of any one configuration)."""

ELECTRONIC_STRUCTURE = ("gpaw", "vasp", "cp2k", "psi4", "pyscf")
"""Electronic-structure codes whose ASE calculators compute in the Python process or
drive their program themselves: a target whose class or module name holds one of these
(GPAW, or a wrapper named after it) takes a GFN-xTB prior, as does any of ASE's
calculators that run a program through files or a socket (VASP, ORCA, Gaussian,
Quantum ESPRESSO, FHI-aims, ...)."""

RULES = {
    "periodic": "the pair springs: a periodic cell",
    "electronic-structure": "GFN2-xTB (tblite), the GP learns the difference: the target is "
    "an electronic-structure code",
    "auto": "GFN2-xTB (tblite), the GP learns the difference: prior='auto' and the target is "
    "not tblite",
    "tblite-target-minimum": "the Lindh model: the target is tblite itself, whose calls an "
    "xTB prior would double",
    "tblite-target-saddle": "the other GFN-xTB method: the target is tblite itself, and the "
    "Lindh model is softest along torsions, not along the reaction",
    "tblite-target-band": "the highest energy computed: the target is tblite itself",
    "other-target": "the Lindh model: the target is no electronic-structure code (a prior "
    "calculator may cost more than its calls)",
    "barrier": "GFN2-xTB (tblite), the GP learns the difference: across a barrier a model "
    "prior is far off (the Lindh model softest along torsions, not the reaction)",
    "no-tblite": "no calculator prior: tblite is not installed (pip install tblite)",
    "no-parameters": "no calculator prior: GFN-xTB has no parameters for some elements",
}
"""The reason codes of :class:`PriorChoice` and their log lines."""

XTB_LAST_ELEMENT = 86  # GFN1- and GFN2-xTB are parametrised for H to Rn


@dataclass(frozen=True)
class PriorChoice:
    """The default prior of one run.

    Attributes
    ----------
    prior : str or ase calculator
        What the driver's ``prior`` argument would take: ``'springs'``, a name of
        :data:`MODEL_PRIOR`, or a tblite calculator.
    rule : str
        The reason code, a key of :data:`RULES`.
    reason : str
        The log's line.
    """

    prior: object
    rule: str
    reason: str


def default_prior(atoms, driver, periodic=None, any_target=False, threads=None):
    """The prior ``prior=None`` takes for ``atoms`` under ``driver``, by :data:`POLICY`
    (``prior='auto'`` with ``any_target``).

    Parameters
    ----------
    atoms : ase.Atoms
        With the target calculator attached.
    driver : str
        One of :data:`DRIVERS`.
    periodic : bool, optional
        Whether the system is periodic (a cell filter's atoms are); by default whether
        ``atoms`` has a periodic direction.
    any_target : bool
        A GFN2-xTB prior under any target but tblite, not only under an
        electronic-structure code (``prior='auto'``).
    threads : int, optional
        The OpenMP threads of a GFN-xTB prior's calls: the driver's own
        (:func:`asebo.threads.optimizer_threads` where None).

    Returns
    -------
    PriorChoice
    """
    if driver not in DRIVERS:
        raise ValueError(f"driver {driver!r}: use one of {', '.join(DRIVERS)}")
    periodic = bool(np.any(atoms.pbc)) if periodic is None else periodic
    if periodic:
        return _choice("springs", "periodic")
    target = getattr(atoms, "calc", None)
    model = MODEL_PRIOR[driver]
    tblite = wrapped_by(target, ("tblite",))
    any_target = any_target or driver != "minimum"  # a barrier takes an xTB prior anywhere
    if tblite is None and not (any_target or is_electronic_structure(target)):
        return _choice(model, "other-target")
    if importlib.util.find_spec("tblite") is None:
        return _choice(model, "no-tblite")
    heavy = sorted({int(z) for z in atoms.numbers if z > XTB_LAST_ELEMENT})
    if heavy:
        return _choice(model, "no-parameters", f" (atomic numbers {heavy})")
    if tblite is None:
        rule = "electronic-structure" if is_electronic_structure(target) else "auto"
        rule = "barrier" if rule == "auto" and driver != "minimum" else rule
        return _choice(_gfn_xtb("gfn2", target_charge(target), threads), rule)
    if driver != "saddle":
        return _choice(model, f"tblite-target-{driver}")
    parameters = getattr(tblite, "parameters", {})
    other = "gfn1" if parameters.get("method", "GFN2-xTB") == "GFN2-xTB" else "gfn2"
    given = {
        key: parameters[key]
        for key in ("charge", "multiplicity")
        if parameters.get(key) is not None
    }
    return _choice(
        _gfn_xtb(other, given, threads), "tblite-target-saddle", f" ({other.upper()}-xTB)"
    )


def target_charge(target):
    """The total charge and spin multiplicity the target calculator (or one of its
    parts, :func:`calculator_parts`) sets as parameters, as tblite's ``charge`` and
    ``multiplicity``, for the GFN2-xTB prior to describe the same ion or radical: GPAW's,
    ORCA's and tblite's ``charge``; ORCA's and Gaussian's ``mult``, tblite's and Q-Chem's
    ``multiplicity``. Each is read from the calculator's ``parameters``, else from its
    ``todict()`` (a wrapper's own options: the ``gpaw`` preset's); where none sets it,
    it is left out (tblite then reads the atoms' initial charges and magnetic moments,
    as the target does)."""
    given = {}
    for inner in calculator_parts(target):
        for name, keys in (("charge", ("charge",)), ("multiplicity", ("multiplicity", "mult"))):
            value = _parameter(inner, keys)
            if value is not None and name not in given:
                given[name] = value
    return given


def _parameter(calculator, keys):
    """The first of ``keys`` that ``calculator`` sets (:func:`target_charge`), or None."""
    sources = [getattr(calculator, "parameters", None)]
    if callable(getattr(calculator, "todict", None)):
        sources.append(calculator.todict())
    for parameters in sources:
        for key in keys:
            if hasattr(parameters, "get"):  # ASE's Parameters, a dict
                value = parameters.get(key)
            else:  # GPAW's own parameters object
                value = getattr(parameters, key, None)
            if value is not None:
                return value
    return None


def _choice(prior, rule, detail=""):
    return PriorChoice(prior, rule, RULES[rule] + detail)


def _gfn_xtb(name, given, threads):
    from asebo.model.prior_calculators import XTB_METHODS, gfn_xtb

    return gfn_xtb(XTB_METHODS[name], threads, **given)


def calculator_chain(calculator):
    """``calculator`` and those it wraps (as ``calc``, a call counter's way), outermost
    first; nothing for None."""
    for _ in range(8):  # wrappers of wrappers, never a cycle
        if calculator is None:
            return
        yield calculator
        calculator = getattr(calculator, "calc", None)


def calculator_parts(calculator):
    """``calculator`` and every calculator inside it, depth first, outermost first: those
    it wraps (``calc``), the terms of ASE's sums and mixtures (``calcs``, a mixer's
    ``calcs``) and the DFT calculator a dispersion correction adds to (``dft``); nothing
    for None. A GPAW target with a D3 correction, ``SumCalculator([GPAW(...), DFTD3()])``,
    holds GPAW."""
    seen = set()
    stack = [(calculator, 0)]
    while stack:
        inner, depth = stack.pop()
        if inner is None or id(inner) in seen or depth > 8:  # never a cycle
            continue
        seen.add(id(inner))
        yield inner
        mixer = getattr(inner, "mixer", None)
        inside = [getattr(inner, "calc", None), getattr(inner, "dft", None)]
        inside += list(getattr(inner, "calcs", None) or getattr(mixer, "calcs", None) or [])
        stack.extend((part, depth + 1) for part in reversed(inside))


def wrapped_by(calculator, names):
    """The calculator among ``calculator``'s parts (:func:`calculator_parts`) whose class
    name or a part of whose module name is one of ``names``; None where none is."""
    for inner in calculator_parts(calculator):
        kind = type(inner)
        where = f"{kind.__module__}.{kind.__name__}".lower().split(".")
        if any(name in where for name in names):
            return inner
    return None


def is_electronic_structure(calculator):
    """Whether ``calculator`` (or one of its parts, :func:`calculator_parts`) is an
    electronic-structure code: one of ASE's calculators that run a program through files
    or a socket, or a class whose module or name holds a name of
    :data:`ELECTRONIC_STRUCTURE`."""
    from ase.calculators.calculator import FileIOCalculator
    from ase.calculators.genericfileio import GenericFileIOCalculator
    from ase.calculators.socketio import SocketIOCalculator

    programs = (FileIOCalculator, GenericFileIOCalculator, SocketIOCalculator)
    for inner in calculator_parts(calculator):
        kind = type(inner)
        where = f"{kind.__module__}.{kind.__name__}".lower()
        if isinstance(inner, programs) or any(name in where for name in ELECTRONIC_STRUCTURE):
            return True
    return False


POLICY = {
    "periodic cell": (
        {driver: "the pair springs" for driver in DRIVERS},
        "no xTB method describes a periodic cell here; CHGNet (prior='auto') costs far more "
        "per step",
    ),
    "molecule, an electronic-structure target": (
        {driver: "GFN2-xTB" for driver in DRIVERS},
        "each target call costs far more than the prior's calls in the search",
    ),
    "molecule, tblite the target": (
        {
            "minimum": "the Lindh model",
            "band": "the highest energy computed",
            "saddle": "GFN1-xTB (GFN2-xTB under GFN1-xTB)",
        },
        "an xTB prior would double the cost of each call, save in a saddle search: the "
        "Lindh model is softest along torsions, not along the reaction",
    ),
    "molecule, any other target": (
        {"minimum": "the Lindh model", "band": "GFN2-xTB", "saddle": "GFN2-xTB"},
        "a prior calculator may cost more than the target's calls of a minimisation; "
        "across a barrier a model prior is far off (the Lindh model is softest along "
        "torsions and holds no atomic cluster together)",
    ),
}
"""The default prior by system and driver, and why, for the documentation's table;
where tblite is missing or lacks an element's parameters, each driver takes
:data:`MODEL_PRIOR`."""


def policy_table():
    """:data:`POLICY` as a markdown table: a row per system and target, a column per
    driver, and why."""
    names = {"minimum": "`BOOptimizer`", "band": "`BONEB`", "saddle": "`BOSaddle`"}
    lines = [
        "| system, target | " + " | ".join(names[d] for d in DRIVERS) + " | why |",
        "|---" * (len(DRIVERS) + 2) + "|",
    ]
    for kind, (priors, why) in POLICY.items():
        lines.append(f"| {kind} | " + " | ".join(priors[d] for d in DRIVERS) + f" | {why} |")
    return "\n".join(lines)
