"""Write the tables of settings and of the default prior of docs/using.md.

The table between each pair of marker comments of docs/using.md is replaced by
:func:`asebo.optimize.settings.settings_table` and
:func:`asebo.model.default_prior.policy_table`; run ``python scripts/settings_table.py``
after a field, a rule or its description changes (tests/test_settings_resolution.py
checks that the page holds the generated tables).
"""

from pathlib import Path

from asebo.model.default_prior import policy_table
from asebo.optimize.settings import settings_table

USING = Path(__file__).resolve().parents[1] / "docs" / "using.md"
TABLES = {
    "settings": settings_table,
    "default prior": policy_table,
}
"""The generated tables of the page, by the name in their markers."""


def _markers(name):
    return (
        f"<!-- {name} table: scripts/settings_table.py writes it -->\n",
        f"<!-- end of the {name} table -->",
    )


def updated(text):
    """``text`` with each table of :data:`TABLES` generated anew between its markers, a
    blank line either side; a ValueError where markers are missing."""
    for name, table in TABLES.items():
        begin, end_marker = _markers(name)
        start, end = text.find(begin), text.find(end_marker)
        if start < 0 or end < start:
            raise ValueError(f"{USING} has lost the markers {begin.strip()} ... {end_marker}")
        text = f"{text[: start + len(begin)]}\n{table()}\n{text[end:]}"
    return text


if __name__ == "__main__":
    USING.write_text(updated(USING.read_text(encoding="utf-8")), encoding="utf-8")
