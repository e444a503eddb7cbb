"""Fixtures shared by the command tests: the relaxed endpoints of a hop as files."""

import shutil

import pytest

from asebo.benchmarks.neb import au_on_al100


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    """Relaxed endpoints of Au on Al(100), hollow to hollow, as files."""
    folder = tmp_path_factory.mktemp("ends")
    initial, final, _ = au_on_al100()
    initial.write(folder / "initial.traj")
    final.write(folder / "final.traj")
    return folder


@pytest.fixture
def ends(endpoints, tmp_path, monkeypatch):
    """The endpoints copied into a folder of the test's own, the working directory."""
    for name in ("initial.traj", "final.traj"):
        shutil.copy(endpoints / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path
