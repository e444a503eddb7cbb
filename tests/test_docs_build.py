"""The documentation site builds with ``mkdocs build --strict``, offline: the API page
shows no Sphinx markup and every documented parameter of the drivers, the mathematics is
MathML and no page loads a script or style sheet from a network."""

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("latex2mathml")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    return folder


def test_the_api_page_shows_no_sphinx_markup(site):
    page = (site / "api" / "index.html").read_text()
    assert not re.search(r":(class|func|meth|mod|data|attr|exc|obj|math):", page)
    assert ".. math::" not in page
    assert 'href="#asebo.optimize.trust.TrustRegion"' in page  # a role became a link


def documented_parameters(driver):
    """The names of the Parameters section of ``driver``'s docstring."""
    import griffe

    sections = griffe.Docstring(inspect.getdoc(driver), parser="numpy").parse()
    return {
        item.name
        for section in sections
        if section.kind.value == "parameters"
        for item in section.value
    }


def test_the_parameter_tables_list_every_parameter_of_the_drivers(site):
    from asebo import BONEB, BOOptimizer, BOSaddle

    page = (site / "api" / "index.html").read_text()
    for driver in (BOOptimizer, BONEB, BOSaddle):
        start = page.index(f'id="{driver.__module__}.{driver.__name__}"')
        table = page[start : page.index("</table>", start)]
        rows = re.findall(r"<td>\s*<code>(\w+)</code>\s*</td>", table)
        wanted = documented_parameters(driver)
        assert len(wanted) > 10 and wanted <= set(rows), wanted - set(rows)


def test_the_mathematics_is_mathml_without_a_script_from_the_network(site):
    for name in ("theory", "api"):
        page = (site / name / "index.html").read_text()
        assert "<math" in page and 'class="arithmatex"' not in page
    for page in site.rglob("*.html"):
        assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?:", page.read_text()), page
