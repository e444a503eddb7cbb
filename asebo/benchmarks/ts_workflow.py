"""From two minima to a transition state: asebo's workflow against ASE's NEB then Sella.

For each system, from the same relaxed end states and the same IDPP band (the sets of
``asebo bench neb``: ``--set emt``, three EMT hops, the default; ``--set reactions``,
Birkholz and Schlegel's reactions with GFN2-xTB):

- **asebo**: :func:`asebo.barrier.transition_state`, a loose band (``--band-fmax``,
  1 eV/Å), the saddle search from its highest image to ``--fmax``, and its own check
  (the model's Hessian and descents on the model, the calculator where the model is
  unsure). Calls of the band's moving
  images, of the saddle stage and of the check.
- **NEB+Sella**: ASE's NEB (no climbing image) with FIRE to 0.5 eV/Å, as quacc's
  NEB-then-Sella recipe runs it, then Sella (``order=1``, internal coordinates for a
  molecule, Cartesian in a periodic cell) from the highest image to ``--fmax``. Calls
  of the moving images and of Sella.
- **CI-NEB**: ASE's climbing-image NEB with FIRE to ``--fmax``; the climbing image is
  the saddle point.

Every endpoint is then verified the same way, its calls not counted: the calculator's
finite-difference Hessian (:func:`asebo.barrier.modes.calculator_hessian`, imaginary
modes above :data:`asebo.barrier.modes.IMAGINARY_THRESHOLD` cm⁻¹) and BFGS descents on
the calculator either way along its lowest mode, each end compared with the two
minima (:func:`asebo.barrier.connection.descents`, RMSD below
:data:`asebo.barrier.workflow.TOLERANCE` Å). A row gives the calls of each method and
whether its endpoint is a first-order saddle point joining the two minima
(``verified``) or why not, and the barrier above the first minimum; the table ends with
the calls in all and asebo's calls as a fraction of NEB+Sella's.

``--band-fmax`` and ``--no-climb`` set asebo's loose band (what its defaults were
chosen on); ``--hessian calculator`` and ``--descent calculator`` run asebo's own check
on the calculator (its calls counted).
"""

import time
from functools import partial
from pathlib import Path

import numpy as np
from ase.calculators.emt import EMT
from ase.mep import NEB
from ase.optimize import FIRE

from asebo.benchmarks._options import (
    positive_float,
    positive_int,
    refuse_missing,
    refuse_unknown,
)
from asebo.benchmarks.neb import REACTIONS, SYSTEMS, Counted, idpp_band, reaction

METHODS = ("asebo", "NEB+Sella", "CI-NEB")
QUACC_FMAX = 0.5
"""eV/Å: the loose band of the NEB-then-Sella workflow before Sella."""
DEFAULT_REACTIONS = (
    "02_hcn",
    "11_h2co",
    "12_hf_eth",
    "14_meoh",
    "00_c2no2",
    "01_c5ht",
    "04_cpht",
    "05_cycbut",
)


def add_arguments(parser):
    parser.add_argument("--set", choices=("emt", "reactions"), default="emt", help="which systems")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=sorted(SYSTEMS),
        default=sorted(SYSTEMS),
        help="the EMT hops (--set emt)",
    )
    parser.add_argument(
        "--reactions",
        nargs="+",
        default=list(DEFAULT_REACTIONS),
        help="the reactions (--set reactions; file stems of asebo/data/reactions)",
    )
    parser.add_argument(
        "--calculator",
        default="gfn2",
        help="the calculator preset of the reactions (--set reactions); default: gfn2",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=list(METHODS),
        help="the methods to run, in the table's order (default: all three)",
    )
    parser.add_argument(
        "--fmax", type=positive_float, default=0.05, help="eV/Å, of the saddle point"
    )
    parser.add_argument("--band-fmax", type=float, default=1.0, help="eV/Å, of asebo's loose band")
    parser.add_argument(
        "--no-climb", action="store_true", help="asebo's loose band without its climbing image"
    )
    parser.add_argument(
        "--hessian", choices=("model", "calculator"), default="model", help="asebo's check"
    )
    parser.add_argument(
        "--descent", choices=("model", "calculator"), default="model", help="asebo's check"
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=1000,
        help="steps at most of each optimizer (asebo: calls)",
    )


def _cases(args):
    """(name, endpoints builder, calculator maker) of each system of ``args``."""
    if args.set == "emt":
        return [(name, SYSTEMS[name], EMT) for name in args.systems]
    from calculators import get_calculator

    make = partial(get_calculator, args.calculator)
    return [
        (name, partial(reaction, Path(REACTIONS) / f"{name}.xyz", make), make)
        for name in args.reactions
    ]


def run_asebo(initial, final, moving, make, args):
    """asebo's workflow: (calls by stage, saddle atoms, its own verdict)."""
    from asebo.barrier import transition_state

    counter = Counted(make())
    result = transition_state(
        initial,
        final,
        counter,
        n_images=moving,
        fmax=args.fmax,
        band_fmax=args.band_fmax,
        climb=not args.no_climb,
        steps=min(args.steps, 300),
        hessian=args.hessian,
        descent=args.descent,
    )
    calls = dict(result.calls)
    calls.pop("endpoints")
    if counter.calls != result.total_calls:  # the record against the calculator's count
        raise RuntimeError(
            f"asebo recorded {result.total_calls} calls, the calculator made {counter.calls}"
        )
    return calls, result.atoms, result.code


def _ase_band(initial, final, positions, make, climb):
    """ASE's NEB at ``positions``, a counted calculator on each moving image."""
    images = []
    for index, where in enumerate(positions):
        image = (final if index == len(positions) - 1 else initial).copy()
        image.positions = where
        image.calc = make() if index in (0, len(positions) - 1) else Counted(make())
        images.append(image)
    return NEB(images, climb=climb, method="improvedtangent")


def _highest(neb):
    """A copy of the band's highest moving image (no call: its calculator holds it)."""
    energies = [image.get_potential_energy() for image in neb.images[1:-1]]
    top = neb.images[1 + int(np.argmax(energies))]
    atoms = top.copy()
    return atoms


def run_neb_sella(initial, final, positions, make, args):
    """ASE's NEB with FIRE to :data:`QUACC_FMAX`, then Sella from its highest image."""
    from sella import Sella

    neb = _ase_band(initial, final, positions, make, climb=False)
    FIRE(neb, logfile=None).run(fmax=QUACC_FMAX, steps=args.steps)
    band_calls = sum(image.calc.calls for image in neb.images[1:-1])
    atoms = _highest(neb)
    atoms.calc = Counted(make())
    converged = Sella(atoms, internal=not atoms.pbc.any(), order=1, logfile=None).run(
        fmax=args.fmax, steps=args.steps
    )
    code = "" if converged else "not converged"
    return {"band": band_calls, "saddle": atoms.calc.calls}, atoms, code


def run_ci_neb(initial, final, positions, make, args):
    """ASE's climbing-image NEB with FIRE to ``--fmax``."""
    neb = _ase_band(initial, final, positions, make, climb=True)
    converged = FIRE(neb, logfile=None).run(fmax=args.fmax, steps=args.steps)
    calls = sum(image.calc.calls for image in neb.images[1:-1])
    return {"band": calls}, _highest(neb), "" if converged else "not converged"


VERIFY_FMAX = 0.01
"""eV/Å: the verification's descents with the calculator (not counted) end here."""


def verified(atoms, initial, final, make, steps):
    """The verdict on ``atoms`` with the calculator, its calls not counted: 'verified',
    or what fails (the imaginary modes, where the descents end), and the imaginary
    frequency."""
    from asebo.barrier.connection import descents
    from asebo.barrier.modes import calculator_hessian, normal_modes
    from asebo.barrier.workflow import TOLERANCE
    from asebo.optimize.subspace import free_atoms

    free = free_atoms(atoms)
    hessian = calculator_hessian(atoms, make(), free)
    modes = normal_modes(hessian, atoms, free, rotations=not atoms.pbc.any())
    found = descents(
        atoms, modes.lowest, initial, final, make(), None, VERIFY_FMAX, steps, TOLERANCE
    )
    problems = []
    if modes.order != 1:
        problems.append(f"{modes.order} imaginary")
    if not found.connected:
        problems.append("ends " + "/".join(found.ends))
    imaginary = f"{modes.imaginary[0]:.0f}i" if modes.imaginary else "-"
    return ("verified" if not problems else ", ".join(problems)), imaginary


def _cell(outcome):
    if "error" in outcome:
        return f"{outcome['error']} | - | -"
    calls = outcome["calls"]
    parts = " + ".join(str(count) for count in calls.values())
    total = sum(calls.values())
    counted = f"{total} ({parts})" if len(calls) > 1 else str(total)
    verdict = outcome["verdict"]
    if outcome["code"] and outcome["code"] != "transition state":
        verdict = f"{verdict}; says {outcome['code']}"
    return f"{counted} | {verdict} ({outcome['imaginary']}) | {outcome['barrier']:.3f}"


def run(args):
    from asebo.barrier.workflow import check_options

    if args.set == "reactions":
        from calculators import get_calculator

        refuse_unknown(
            "asebo bench ts_workflow", [("--calculator", get_calculator, args.calculator)]
        )
        refuse_missing("asebo bench ts_workflow", REACTIONS, args.reactions)
    try:
        check_options(fmax=args.fmax, band_fmax=args.band_fmax, steps=args.steps)
    except ValueError as error:
        raise SystemExit(f"asebo bench ts_workflow: {error}") from None
    methods = [method for method in METHODS if method in args.methods]
    rows, totals, seconds = [], dict.fromkeys(methods, 0), dict.fromkeys(methods, 0.0)
    for name, build, make in _cases(args):
        initial, final, moving = build()
        positions = idpp_band(initial, final, moving)
        reference = initial.get_potential_energy()
        cells = []
        for method in methods:
            start = time.perf_counter()
            try:
                if method == "asebo":
                    calls, atoms, code = run_asebo(initial, final, moving, make, args)
                elif method == "NEB+Sella":
                    calls, atoms, code = run_neb_sella(initial, final, positions, make, args)
                else:
                    calls, atoms, code = run_ci_neb(initial, final, positions, make, args)
            except Exception as error:  # an SCF that fails: a row that says so
                outcome = {"error": f"{type(error).__name__}: {str(error)[:80]}"}
            else:
                seconds[method] += time.perf_counter() - start
                verdict, imaginary = verified(atoms, initial, final, make, args.steps)
                probe = atoms.copy()
                probe.calc = make()
                outcome = {
                    "calls": calls,
                    "code": code,
                    "verdict": verdict,
                    "imaginary": imaginary,
                    "barrier": probe.get_potential_energy() - reference,
                }
                totals[method] += sum(calls.values())
            print(f"{name} {method}: {_cell(outcome)}", flush=True)
            cells.append(_cell(outcome))
        rows.append(f"| {name} ({moving} images) | " + " | ".join(cells) + " |")
    print()
    header = " | ".join(f"{m} calls | {m} endpoint | {m} barrier (eV)" for m in methods)
    print(f"| system | {header} |")
    print("|---|" + "---|---|---|" * len(methods))
    print("\n".join(rows))
    print()
    for method in methods:
        print(f"- {method}: {totals[method]} calls in all, {seconds[method]:.0f} s")
    if {"asebo", "NEB+Sella"} <= set(methods) and totals["NEB+Sella"]:
        ratio = totals["asebo"] / totals["NEB+Sella"]
        print(f"- asebo / NEB+Sella calls: {ratio:.2f}")
