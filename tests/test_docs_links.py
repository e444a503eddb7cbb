"""Every link and #anchor in the docs and the README leads somewhere.

Anchors follow MkDocs' slugs (Python-Markdown's toc extension): the heading's text
without markup, lower case, punctuation dropped, spaces as hyphens, ``_1``, ``_2``
for repeated headings.
"""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]


def slug(text):
    """MkDocs' anchor of a heading's ``text``."""
    text = re.sub(r"`|\*\*|\*|\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def lines_outside_code(path):
    """(line number, line) of ``path`` outside fenced code blocks."""
    inside = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def anchors(path):
    """The anchors of every heading of the markdown file ``path``."""
    found, seen = set(), {}
    for _, line in lines_outside_code(path):
        match = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}_{count}")
    return found


def broken_links(path):
    """'line: target (why)' for every local link of ``path`` that leads nowhere."""
    broken = []
    for number, line in lines_outside_code(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            destination = path if not file_part else (path.parent / file_part).resolve()
            if not destination.exists():
                broken.append(f"{number}: {target} (no file)")
            elif anchor and (destination.suffix != ".md" or anchor not in anchors(destination)):
                broken.append(f"{number}: {target} (no anchor)")
    return broken


def test_slug_follows_mkdocs():
    assert slug("The Baker set (`asebo bench baker`)") == "the-baker-set-asebo-bench-baker"
    assert slug("Net force and torque: the part the invariant model cannot see") == (
        "net-force-and-torque-the-part-the-invariant-model-cannot-see"
    )


def test_a_broken_anchor_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[here](#title) [there](#nowhere) [file](missing.md)\n")
    assert broken_links(page) == ["3: #nowhere (no anchor)", "3: missing.md (no file)"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_a_page_leads_somewhere(page):
    assert broken_links(page) == []
