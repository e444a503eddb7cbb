"""Write the table of settings of docs/using.md from the settings' dataclasses.

The table between the two marker comments of docs/using.md is replaced by
:func:`asebo.optimize.settings.settings_table`; run ``python scripts/settings_table.py``
after a field or its description changes (tests/test_settings_resolution.py checks
that the page holds the generated table).
"""

from pathlib import Path

from asebo.optimize.settings import settings_table

USING = Path(__file__).resolve().parents[1] / "docs" / "using.md"
BEGIN = "<!-- settings table: scripts/settings_table.py writes it -->\n"
END = "<!-- end of the settings table -->"


def updated(text):
    """``text`` with the table between :data:`BEGIN` and :data:`END` generated anew,
    a blank line either side; a ValueError where the markers are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{USING} has lost the markers {BEGIN.strip()} ... {END}")
    return f"{text[: start + len(BEGIN)]}\n{settings_table()}\n{text[end:]}"


if __name__ == "__main__":
    USING.write_text(updated(USING.read_text(encoding="utf-8")), encoding="utf-8")
