"""Named calculator presets: ``get_calculator(name, **kw)`` and ``available()``.

A preset is a function that imports its package lazily, so that
``import calculators`` works without tblite or GPAW, and a missing package is
reported with the line that installs it.
"""

import ast
import importlib
import importlib.util

from .box import MoleculeBoxCalculator

TBLITE_INSTALL = "pip install tblite"
GPAW_INSTALL = "apt-get install libxc-dev libopenblas-dev && CC=g++ pip install gpaw gpaw-data"


def _import(module, package, install):
    """Import ``module`` or raise an ImportError that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{package} is not installed: {install}") from exc


def _tblite(method, kw):
    tblite_ase = _import("tblite.ase", "tblite", TBLITE_INSTALL)
    return tblite_ase.TBLite(**{"method": method, "verbosity": 0, **kw})


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
    return _tblite("GFN2-xTB", kw)


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
    return _tblite("GFN1-xTB", kw)


def gpaw(mode="fd", h=0.2, vacuum=4.0, xc="PBE", basis="dzp", align=False, **kw):
    """GPAW for an isolated molecule, wrapped in a :class:`MoleculeBoxCalculator`.

    GPAW needs a cell; the wrapper gives each configuration a box with
    ``vacuum`` Å around it and ``pbc=False`` without touching the user's Atoms
    (see :class:`MoleculeBoxCalculator`).

    Parameters
    ----------
    mode : {'fd', 'lcao'}
        Real-space finite differences or an atomic-orbital basis.
    h : float
        Grid spacing in Å (0.2 is converged enough for geometries; 0.25 is a
        coarse, fast grid).
    vacuum : float
        Vacuum in Å between the atoms and the box walls.
    xc : str
        Exchange-correlation functional.
    basis : str
        Basis set in LCAO mode (ignored in fd mode); ``dzp`` ships with gpaw-data.
    align : bool
        Rotate each configuration onto the first one's orientation, which makes the
        energy invariant under rotations and takes the grid's torque out of the
        forces (``'gpaw:align=True'``; :class:`MoleculeBoxCalculator`).
    **kw
        Passed to ``gpaw.GPAW``; they override the preset's ``txt=None``
        (quiet) and ``symmetry='off'`` (a relaxation breaks point-group
        symmetry, which GPAW otherwise refuses).

    References
    ----------
    J. J. Mortensen et al., J. Chem. Phys. 160, 092503 (2024).
    """
    if mode not in ("fd", "lcao"):
        raise ValueError(f"mode must be 'fd' or 'lcao', got {mode!r}")
    gpaw_module = _import("gpaw", "GPAW", GPAW_INSTALL)
    _import("gpaw_data", "gpaw-data (the PAW setups)", GPAW_INSTALL)
    parameters = {"mode": mode, "h": h, "xc": xc, "txt": None, "symmetry": "off"}
    if mode == "lcao":
        parameters["basis"] = basis
    calc = gpaw_module.GPAW(**{**parameters, **kw})
    return MoleculeBoxCalculator(calc, vacuum=vacuum, align=align)


def emt(**kw):
    """ASE's effective-medium theory (metals; H, C, N, O for tests)."""
    from ase.calculators.emt import EMT

    return EMT(**kw)


def lj(**kw):
    """ASE's Lennard-Jones potential (``sigma``, ``epsilon``, ``rc``, ``smooth``)."""
    from ase.calculators.lj import LennardJones

    return LennardJones(**kw)


PRESETS = {"gfn2": gfn2, "gfn1": gfn1, "gpaw": gpaw, "emt": emt, "lj": lj}
REQUIRED_MODULES = {
    "gfn2": ("tblite",),
    "gfn1": ("tblite",),
    "gpaw": ("gpaw", "gpaw_data"),
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
    word: ``asebo compare --calc gpaw:h=0.25,vacuum=3.5``.

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
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = item.partition("=")
        if not equals or not key.strip().isidentifier():
            raise ValueError(f"calculator option {item!r} of {spec!r} is not key=value")
        try:
            options[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            options[key.strip()] = value.strip()
    return name, options


def get_calculator(name, **kw):
    """A fresh ASE calculator from a preset name.

    Parameters
    ----------
    name : str
        One of :func:`available` (case-insensitive): ``gfn2`` (the default
        cheap method), ``gfn1``, ``gpaw`` (the DFT target), ``emt``, ``lj``;
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
        For an unknown name or a malformed option.
    ImportError
        When the preset's package is missing; the message has the install line.
    """
    key, options = parse_preset(name)
    return PRESETS[key](**{**options, **kw})
