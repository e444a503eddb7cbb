"""Named calculator presets: ``get_calculator(name, **kw)`` and ``available()``.

A preset is a function that imports its package lazily, so that
``import calculators`` works without tblite or GPAW, and a missing package is
reported with the line that installs it. The GFN-xTB and CHGNet presets are the
builders of asebo's automatic priors (:mod:`asebo.model.prior_calculators`), the one
module of asebo this package imports: asebo's optimizers import nothing from here.
"""

import ast
import importlib.util
import numbers

from asebo.model import prior_calculators
from asebo.model.prior_calculators import import_or_explain

from .cell_aware_gpaw import CellAwareGPAW

GPAW_INSTALL = "apt-get install libxc-dev libopenblas-dev && CC=g++ pip install gpaw gpaw-data"


def gfn2(**kw):
    """GFN2-xTB through tblite, quiet (``verbosity=0``).

    Parameters
    ----------
    **kw
        Passed to ``tblite.ase.TBLite`` (``charge``, ``multiplicity``,
        ``accuracy``, ``max_iterations``, ...).

    References
    ----------
    C. Bannwarth, S. Ehlert, S. Grimme, J. Chem. Theory Comput. 15, 1652 (2019).
    """
    return prior_calculators.gfn_xtb("GFN2-xTB", **kw)


def gfn1(**kw):
    """GFN1-xTB through tblite, quiet (``verbosity=0``).

    Parameters
    ----------
    **kw
        Passed to ``tblite.ase.TBLite``.

    References
    ----------
    S. Grimme, C. Bannwarth, P. Shushkov, J. Chem. Theory Comput. 13, 1989 (2017).
    """
    return prior_calculators.gfn_xtb("GFN1-xTB", **kw)


def gpaw(**kw):
    """GPAW for molecules in a vacuum box and for periodic Atoms: a :class:`CellAwareGPAW`.

    A molecule (``pbc`` all False) runs in a :class:`MoleculeBoxCalculator` in ``'fd'``
    mode by default; periodic Atoms (bulk, slabs with ``pbc=(True, True, False)``) run
    in their own cell, in ``'lcao'`` mode by default, with k-points along the periodic
    directions and Fermi-Dirac smearing. The user's Atoms are never changed.

    Parameters
    ----------
    **kw
        The options of :class:`CellAwareGPAW` (``mode``, ``h``, ``xc``, ``basis``,
        ``ecut``, ``kpts``, ``kdensity``, ``width``, ``vacuum``, ``align``), and any
        other keyword of ``gpaw.GPAW``, which overrides the preset's ``txt=None``
        (quiet) and ``symmetry``.

    References
    ----------
    J. J. Mortensen et al., J. Chem. Phys. 160, 092503 (2024).
    """
    import_or_explain("gpaw", "GPAW", GPAW_INSTALL)
    import_or_explain("gpaw_data", "gpaw-data (the PAW setups)", GPAW_INSTALL)
    return CellAwareGPAW(**kw)


def chgnet(device="cpu", **kw):
    """CHGNet, a universal machine-learned potential for materials, quiet.

    Its pretrained weights (fitted to PBE and PBE+U energies, forces and stresses of
    the Materials Project's relaxations, 89 elements) come with the package, so it
    installs from the package index alone. It describes periodic cells; a molecule
    needs a cell around it. Energies, forces and stresses are float32 inside the model:
    a difference of about 1e-5 eV between two energies is noise.

    Parameters
    ----------
    device : str
        ``'cpu'`` (the default) or ``'cuda'``.
    **kw
        Passed to ``chgnet.model.dynamics.CHGNetCalculator`` (``stress_weight``,
        ``on_isolated_atoms``, ...).

    References
    ----------
    B. Deng, P. Zhong, K. Jun, J. Riebesell, K. Han, C. J. Bartel, G. Ceder,
    "CHGNet as a pretrained universal neural network potential for charge-informed
    atomistic modelling", Nat. Mach. Intell. 5, 1031 (2023).
    """
    return prior_calculators.chgnet(device, **kw)


def emt(**kw):
    """ASE's effective-medium theory (metals; H, C, N, O for tests)."""
    from ase.calculators.emt import EMT

    return EMT(**kw)


def lj(**kw):
    """ASE's Lennard-Jones potential (``sigma``, ``epsilon``, ``rc``, ``smooth``)."""
    from ase.calculators.lj import LennardJones

    return LennardJones(**kw)


PRESETS = {"gfn2": gfn2, "gfn1": gfn1, "gpaw": gpaw, "chgnet": chgnet, "emt": emt, "lj": lj}
REQUIRED_MODULES = {
    "gfn2": ("tblite",),
    "gfn1": ("tblite",),
    "gpaw": ("gpaw", "gpaw_data"),
    "chgnet": ("chgnet",),
    "emt": (),
    "lj": (),
}


def available(installed=False):
    """Names of the calculator presets.

    Parameters
    ----------
    installed : bool
        If True, only the presets whose packages can be imported here.

    Returns
    -------
    list of str
    """
    return [
        name
        for name in PRESETS
        if not installed
        or all(importlib.util.find_spec(m) is not None for m in REQUIRED_MODULES[name])
    ]


def parse_preset(spec):
    """Split a preset specification ``'name'`` or ``'name:key=value,...'``.

    Values are read as Python literals where they are one (``h=0.25`` gives a float,
    ``mode=lcao`` stays a string), so a preset with options fits in one command-line
    word: ``asebo compare --calc gpaw:h=0.25,vacuum=3.5``. Commas inside brackets
    belong to the value: ``gpaw:kpts=(4,4,1),mode=pw``.

    Parameters
    ----------
    spec : str

    Returns
    -------
    name : str
        Lower-case preset name, one of :func:`available`.
    options : dict
        Keyword arguments of the preset.

    Raises
    ------
    ValueError
        For an unknown name or an option not written ``key=value``.
    """
    name, _, text = str(spec).partition(":")
    name = name.strip().lower()
    if name not in PRESETS:
        raise ValueError(
            f"unknown calculator {spec!r}; choose one of {', '.join(PRESETS)}, "
            "optionally with options as in 'gpaw:h=0.25,vacuum=3.5'"
        )
    options = {}
    for item in filter(None, (part.strip() for part in _split_top_level(text))):
        key, equals, value = item.partition("=")
        if not equals or not key.strip().isidentifier():
            raise ValueError(f"calculator option {item!r} of {spec!r} is not key=value")
        try:
            options[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            options[key.strip()] = value.strip()
    return name, options


def _split_top_level(text):
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for index, character in enumerate(text):
        depth += (character in "([{") - (character in ")]}")
        if character == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]


def get_calculator(name, **kw):
    """A fresh ASE calculator from a preset name.

    Parameters
    ----------
    name : str
        One of :func:`available` (case-insensitive): ``gfn2`` (the default
        cheap method), ``gfn1``, ``gpaw`` (the DFT target), ``chgnet`` (a
        machine-learned potential for materials), ``emt``, ``lj``;
        optionally with options, ``'gpaw:h=0.25,vacuum=3.5'`` (:func:`parse_preset`).
    **kw
        Passed to the preset (see :func:`gfn2`, :func:`gpaw`, ...), over the options
        of ``name``.

    Returns
    -------
    ase.calculators.calculator.Calculator

    Raises
    ------
    ValueError
        For an unknown name, a malformed option, or one the preset's calculator does
        not have (tblite's, EMT's and Lennard-Jones's options are known; a word where
        a number belongs is refused too).
    ImportError
        When the preset's package is missing; the message has the install line.
    """
    key, options = parse_preset(name)
    options = {**options, **kw}
    check_options(key, options)
    return PRESETS[key](**options)


def _known_options(key):
    """The options of preset ``key`` and their defaults, where its calculator has a
    fixed set (tblite's, ASE's EMT and Lennard-Jones); None otherwise (GPAW and
    CHGNet check their own), or where its package is missing (the preset says so)."""
    if key in ("gfn1", "gfn2"):
        if importlib.util.find_spec("tblite") is None:
            return None
        from tblite.ase import TBLite

        return {**TBLite.default_parameters, "threads": None}
    if key in ("emt", "lj"):
        from ase.calculators.emt import EMT
        from ase.calculators.lj import LennardJones

        return dict({"emt": EMT, "lj": LennardJones}[key].default_parameters)
    return None


WHOLE_NUMBERS = ("charge", "multiplicity", "max_iterations")
"""Options of the GFN-xTB presets that take a whole number (tblite's default of the
first two is None: their type is not read from it)."""


def check_options(key, options):
    """Refuse an option preset ``key`` does not have (a misspelt one would be dropped
    silently), the method of a GFN-xTB preset, a word where a number belongs (a whole
    number for :data:`WHOLE_NUMBERS`), and the ``gpaw`` preset's options its calculator
    refuses (:class:`CellAwareGPAW` checks them when built, before any calculation)."""
    if key == "gpaw":
        CellAwareGPAW(**options)
        return
    known = _known_options(key)
    if known is None:
        return
    for option, value in options.items():
        if option == "method" and key in ("gfn1", "gfn2"):
            raise ValueError(
                f"the {key} preset sets the method: use 'gfn1' or 'gfn2' as the name instead"
            )
        if option not in known:
            raise ValueError(
                f"the {key} preset has no option {option!r}; its options: "
                f"{', '.join(sorted(name for name in known if name != 'method'))}"
            )
        default = known[option]
        number = isinstance(default, (int, float)) and not isinstance(default, bool)
        if number and isinstance(value, str):
            raise ValueError(f"option {option}={value!r} of the {key} preset is not a number")
        whole = value is None or isinstance(value, numbers.Integral) and not isinstance(value, bool)
        if key in ("gfn1", "gfn2") and option in WHOLE_NUMBERS and not whole:
            raise ValueError(f"option {option}={value!r} of the {key} preset is not a whole number")
