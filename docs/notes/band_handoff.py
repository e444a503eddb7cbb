"""A band of the reactions set for a few calls, its highest image handed to BOSaddle, and
the saddle point followed down both ways along its imaginary mode.

    python docs/notes/band_handoff.py 07_dacp_eth --band-calls 60

Prints the calls of the band and of the saddle search, the saddle point's imaginary
modes (ASE's finite-difference Hessian, its calls not counted), and where BFGS ends from
0.1 Å either way along the lowest mode: its energy above the reactant and its RMSD to
the reactant and to the product (GFN2-xTB, the benchmark's band: ``asebo bench neb
--set reactions``). The measurement: docs/notes/molecular-bands.md, "A band that does
not converge, handed to the saddle search".
"""

import argparse

import numpy as np
from ase.optimize import BFGS
from ase.vibrations import Vibrations

from asebo.benchmarks.neb import (
    REACTIONS,
    band,
    end_state_rmsd,
    gfn2,
    idpp_band,
    one_box,
    reaction,
)
from asebo.neb import BONEB
from asebo.saddle import BOSaddle

DISPLACEMENT = 0.1  # Å, the largest atomic move off the saddle point along its mode


def lowest_mode(atoms, name):
    """The lowest vibrational energy (imaginary where negative curvature) and its mode
    (n, 3) at ``atoms``, by ASE's finite differences with GFN2-xTB."""
    probe = atoms.copy()
    probe.calc = gfn2()
    vibrations = Vibrations(probe, name=f"band_handoff_{name}", delta=0.005)
    vibrations.clean()
    vibrations.run()
    energies, modes = vibrations.get_vibrations().get_energies_and_modes()
    vibrations.clean()
    lowest = int(np.argmax(np.abs(energies.imag) - energies.real))
    return energies[lowest], modes[lowest]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reaction", help="a file stem of asebo/data/reactions")
    parser.add_argument("--band-calls", type=int, default=60)
    args = parser.parse_args()
    initial, final, moving = reaction(REACTIONS / f"{args.reaction}.xyz")
    positions = idpp_band(initial, final, moving)
    neb = band(initial, final, positions, one_box(gfn2, positions))
    boneb = BONEB(neb, logfile=None)
    converged = boneb.run(fmax=0.05, steps=args.band_calls)
    print(f"band: {boneb.nsteps} calls, converged: {converged}")
    search = BOSaddle.from_band(boneb, logfile=None)
    before = search.atoms.calc.calls
    converged = search.run(fmax=0.05, steps=300)
    reactant = initial.get_potential_energy()
    saddle = search.atoms
    print(
        f"saddle search: {saddle.calc.calls - before} calls, converged: {converged}, "
        f"{saddle.get_potential_energy() - reactant:.3f} eV above the reactant"
    )
    energy, mode = lowest_mode(saddle, args.reaction)
    print(f"lowest mode: {energy.imag * 8065.544:.0f}i cm-1" if energy.imag else "no imaginary")
    step = DISPLACEMENT * mode / np.linalg.norm(mode, axis=1).max()
    for sign in (1, -1):
        down = saddle.copy()
        down.positions = saddle.positions + sign * step
        down.calc = gfn2()
        BFGS(down, logfile=None).run(fmax=0.02, steps=1000)
        print(
            f"down {'+' if sign > 0 else '-'}: {down.get_potential_energy() - reactant:.3f} eV "
            f"above the reactant, RMSD {end_state_rmsd(initial, down):.3f} Å to the reactant and "
            f"{end_state_rmsd(final, down):.3f} Å to the product"
        )
    print(f"the product: {final.get_potential_energy() - reactant:.3f} eV above the reactant")


if __name__ == "__main__":
    main()
