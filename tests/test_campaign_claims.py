"""Campaigns on one database: each run claimed before it is computed, stored once."""

import os
import socket
import subprocess
import sys
import textwrap
import threading

import ase.db

from asebo.campaign import Campaign
from asebo.campaign.execute import _wait_for
from asebo.campaign.molecules import load_molecule
from asebo.campaign.plan import plan_runs
from asebo.campaign.store import CampaignStore
from asebo.campaign.workflow import run_campaign

CAMPAIGN = textwrap.dedent("""
    import sys, time
    from ase.calculators.emt import EMT
    from asebo.campaign.workflow import run_campaign

    class SlowEMT(EMT):
        # slow enough that two campaigns started together overlap; logs each call
        def calculate(self, *args, **kwargs):
            time.sleep(0.05)
            super().calculate(*args, **kwargs)
            with open(sys.argv[2], "a") as fd:
                fd.write("call\\n")

    records = run_campaign(["H2O", "NH3"], ["lbfgs", "bfgs"], starts=2, noise=0.05, seed=1,
                           calc=SlowEMT(), fmax=0.05, steps=100, db=sys.argv[1],
                           scheduler="serial", progress=False, log=lambda line: None)
    print(len(records), sum(r.calls for r in records))
""")


def quick(db, log=lambda line: None, **kwargs):
    return run_campaign(
        ["H2O", "NH3"],
        ["lbfgs", "bfgs"],
        starts=2,
        noise=0.05,
        seed=1,
        calc="emt",
        fmax=0.05,
        steps=100,
        db=db,
        scheduler="serial",
        progress=False,
        log=log,
        **kwargs,
    )


def test_two_campaigns_started_together_compute_every_run_once(tmp_path):
    script = tmp_path / "campaign.py"
    script.write_text(CAMPAIGN)
    db, calls = str(tmp_path / "runs.db"), tmp_path / "calls.txt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), db, str(calls)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    rows = list(ase.db.connect(db).select())
    names = [(row.molecule, row.optimizer, row.start) for row in rows]
    assert len(names) == len(set(names)) == 8
    assert all("calls" in row.key_value_pairs for row in rows)
    # every calculator call of both processes belongs to exactly one stored run
    assert calls.read_text().count("\n") == sum(row.calls for row in rows)
    # both report every run, each once
    totals = {out.split()[0] + " " + out.split()[1] for out, _ in outputs}
    assert totals == {f"8 {sum(row.calls for row in rows)}"}
    assert len(CampaignStore(db).records()) == 8


def planned_runs():
    campaign = Campaign(calc="emt", fmax=0.05, steps=100, noise=0.05, seed=1)
    molecules = [load_molecule("H2O"), load_molecule("NH3")]
    return campaign, plan_runs(molecules, ["lbfgs", "bfgs"], 2, campaign)


def test_a_claimed_run_is_neither_computed_nor_reported_twice(tmp_path):
    db = str(tmp_path / "runs.db")
    campaign, runs = planned_runs()
    store = CampaignStore(db)
    assert store.claim(runs[0], campaign) is not None
    assert store.claim(runs[0], campaign) is None  # taken
    assert store.unfinished() == {runs[0].name: f"{socket.gethostname()}:{os.getpid()}"}
    assert store.records() == [] and store.stored() == set()
    assert store.release() == [runs[0].name] and store.unfinished() == {}


def test_claims_of_a_process_that_ended_are_run_again(tmp_path):
    db = str(tmp_path / "runs.db")
    campaign, runs = planned_runs()
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    store = CampaignStore(db)
    row = store.claim(runs[0], campaign)
    store.db.update(row, owner=f"{socket.gethostname()}:{int(ended.stdout)}")
    records = quick(db)
    assert len(records) == 8 and store.unfinished() == {}
    assert ase.db.connect(db).count() == 8


def test_a_run_claimed_by_a_live_process_is_waited_for_not_computed(tmp_path):
    db = str(tmp_path / "runs.db")
    quick(db)
    store = CampaignStore(db)
    campaign, runs = planned_runs()
    run = next(r for r in runs if r.name == ("H2O", "lbfgs", 1))
    store.db.delete([store.db.get(molecule="H2O", optimizer="lbfgs", start=1).id])
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        row = store.claim(run, campaign)
        store.db.update(row, owner=f"{socket.gethostname()}:{holder.pid}")
        lines = []
        waiting = threading.Thread(
            target=_wait_for, args=({run.name}, store, lines.append), kwargs={"poll": 0.05}
        )
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive() and lines == []  # waits while the holder lives
        assert run.name not in store.stored()  # and computes nothing
    finally:
        holder.kill()
        holder.wait()
    waiting.join(timeout=10.0)
    assert not waiting.is_alive()
    assert "ended without storing them: this one runs them" in lines[0]
    assert store.unfinished() == {}


def test_a_campaign_runs_what_a_process_it_waited_for_left_undone(tmp_path):
    """The other process dies while this one waits for its run: this one computes it,
    and the campaign ends complete."""
    db = str(tmp_path / "runs.db")
    store = CampaignStore(db)
    campaign, runs = planned_runs()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    threading.Thread(target=holder.wait).start()  # reaped as it ends: no zombie lives on
    try:
        row = store.claim(runs[0], campaign)
        store.db.update(row, owner=f"{socket.gethostname()}:{holder.pid}")
        lines = []
        records = quick(db, log=lines.append)
    finally:
        holder.kill()
        holder.wait()
    assert len(records) == 8 and not any(r.failed for r in records)
    assert any("this one waits for them" in line for line in lines)
    assert any("ended without storing them: this one runs them" in line for line in lines)
    assert store.unfinished() == {} and ase.db.connect(db).count() == 8
