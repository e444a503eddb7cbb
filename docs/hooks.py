r"""The site's build, offline: the docstrings' Sphinx markup as markdown, mathematics as
MathML.

Two parts, both registered in ``mkdocs.yml``:

- :class:`SphinxRoles`, a griffe extension of mkdocstrings' Python handler, rewrites
  every docstring of a package once it is loaded, before mkdocstrings renders it as
  markdown: a cross-reference role (``:class:`~a.b.C```, ``:func:``, ``:meth:``,
  ``:mod:``, ``:data:``, ``:attr:``, ``:exc:``, ``:obj:``) becomes the name in code,
  linked where the API page documents it (an optional mkdocs-autorefs reference, resolved
  in the docstring's own scope as Sphinx resolves it); ``:math:`x``` becomes inline
  mathematics and a ``.. math::`` directive a displayed equation (pymdownx.arithmatex's
  ``\(...\)`` and ``$$...$$``).
- :func:`on_page_content`, an mkdocs hook, turns the mathematics arithmatex marks on
  every page (the pages' ``$$...$$``, the docstrings') into MathML with latex2mathml,
  which browsers draw themselves: no MathJax, no network.
"""

import html
import re
from functools import partial

import griffe
from latex2mathml.converter import convert

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|data|attr|exc|obj|const):`([^`]+)`")
MATH_ROLE = re.compile(r":math:`([^`]+)`")
MATH_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<first>.*)$")
ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])'
    r"\s*</(?P=tag)>",
    re.DOTALL,
)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles and math of every docstring of a loaded package as
    markdown (module docstring)."""

    def on_package(self, *, pkg, loader, **kwargs):
        defined = list(_documented(pkg))
        names = {}  # the paths of the objects of each name: a package's re-exports
        for obj in defined:
            names.setdefault(obj.name, []).append(obj.path)
        for obj in defined:
            if obj.docstring is not None:
                resolve = partial(_resolved, obj=obj, loader=loader, names=names)
                obj.docstring.value = markdown_docstring(obj.docstring.value, resolve)


def _documented(obj):
    """``obj`` and every object defined in it, aliases left out."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _documented(member)


def markdown_docstring(text, resolve):
    """``text`` with its roles and math directives as markdown (module docstring), each
    role's target given its full path by ``resolve``."""
    text = _math_directives(text)
    text = MATH_ROLE.sub(lambda match: rf"\({match.group(1)}\)", text)
    return ROLE.sub(lambda match: _reference(match.group(2), resolve), text)


def _math_directives(text):
    """Every ``.. math::`` directive of ``text`` (its first line and the lines indented
    under it) as an arithmatex display block, at the directive's indentation."""
    lines, out, index = text.splitlines(), [], 0
    while index < len(lines):
        match = MATH_DIRECTIVE.match(lines[index])
        if match is None:
            out.append(lines[index])
            index += 1
            continue
        indent, body = match["indent"], [match["first"].strip()]
        index += 1
        while index < len(lines) and (
            (not lines[index].strip() and _indented_after(lines, index, indent))
            or len(lines[index]) - len(lines[index].lstrip()) > len(indent)
        ):
            body.append(lines[index].strip())
            index += 1
        tex = " ".join(part for part in body if part)
        out.extend(["", f"{indent}$$", f"{indent}{tex}", f"{indent}$$", ""])
    return "\n".join(out)


def _indented_after(lines, index, indent):
    """Whether the first non-blank line after ``index`` is indented deeper than
    ``indent`` (the directive's body goes on past a blank line)."""
    for line in lines[index + 1 :]:
        if line.strip():
            return len(line) - len(line.lstrip()) > len(indent)
    return False


def _reference(target, resolve):
    """The markdown of a role's ``target`` (``~a.b.C``, ``title <a.b.C>``), whose full
    path ``resolve`` gives: the name shown in code, an optional link to its
    documentation."""
    titled = re.fullmatch(r"(.*?)\s*<(.+)>", target)
    if titled:
        shown, path = titled.groups()
    else:
        path = target.lstrip("~")
        shown = path.rsplit(".", 1)[-1] if target.startswith("~") else path
    identifier = resolve(path)
    return (
        f'<autoref identifier="{html.escape(identifier)}" optional>'
        f"<code>{html.escape(shown)}</code></autoref>"
    )


def _resolved(path, obj, loader, names):
    """The full path of ``path`` as Sphinx finds it from ``obj``: the object itself where
    loaded (an alias's target), else the name in ``obj``'s scope (its members, its
    parents', the names its module imports), else the one object of the package of that
    name under the same top package (``asebo.BOOptimizer``, a lazy re-export), else
    ``path`` as written. ``names``: the paths of the package's objects by name."""
    collection = loader.modules_collection
    head, _, rest = path.partition(".")
    candidates = [path]
    try:
        candidates.insert(0, ".".join(filter(None, [obj.resolve(head), rest])))
    except (griffe.NameResolutionError, griffe.AliasResolutionError):
        pass
    for candidate in candidates:
        try:
            found = collection[candidate]
        except (KeyError, ValueError, griffe.AliasResolutionError):
            continue
        try:
            return found.final_target.path if found.is_alias else found.path
        except griffe.AliasResolutionError:
            return candidate
    top, name = path.split(".")[0], path.rsplit(".", 1)[-1]
    same = [found for found in names.get(name, ()) if found.split(".")[0] == top]
    return same[0] if len(same) == 1 and "." in path else candidates[0]


def on_page_content(html_text, page, config, files):
    """MkDocs hook: the page's arithmatex mathematics as MathML (module docstring)."""

    def mathml(match):
        tex = html.unescape(match["inline"] if match["inline"] is not None else match["block"])
        display = "inline" if match["inline"] is not None else "block"
        return convert(tex.strip(), display=display)

    return ARITHMATEX.sub(mathml, html_text)
