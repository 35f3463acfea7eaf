"""A griffe extension for the documentation site: userdp's docstrings cross-reference with Sphinx roles
(``:func:`heatmap```, ``:class:`~userdp.data.UserDataset```); mkdocstrings writes Markdown, where those
roles would show as text. This turns each role into an *optional* mkdocs-autorefs link: a link when the
target is rendered somewhere on the site, plain code otherwise (never a warning, so ``mkdocs build
--strict`` does not depend on which objects the API pages happen to render).

Configured in ``mkdocs.yml`` (``plugins: mkdocstrings: handlers: python: options: extensions``).
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc|const|term):`(?P<target>[^`]+)`")


def _exists(collection: Any, path: str) -> bool:
    try:
        collection.get_member(path)
    except Exception:  # noqa: BLE001 -- griffe raises KeyError, AliasResolutionError, ...: "not there"
        return False
    return True


def _scopes(obj: griffe.Object) -> list[str]:
    """Where a relative name is looked up: the object, its parents, then each enclosing package."""
    out, cur = [], obj
    while cur is not None:
        out.append(cur.path)
        cur = cur.parent
    return out


def _resolve(obj: griffe.Object, name: str) -> str:
    collection = obj.modules_collection
    if _exists(collection, name):
        return name
    for scope in _scopes(obj):
        if _exists(collection, f"{scope}.{name}"):
            return f"{scope}.{name}"
    return name


def _replace(obj: griffe.Object, text: str) -> str:
    def sub(m: re.Match) -> str:
        target = m["target"].strip()
        title = target
        if "<" in target and target.endswith(">"):  # :func:`title <path>`
            title, target = target[:-1].split("<", 1)
            title, target = title.strip(), target.strip()
        elif target.startswith("~"):
            target = target[1:]
            title = target.rsplit(".", 1)[-1]
        target = target.lstrip(".").removesuffix("()")
        ident = html.escape(_resolve(obj, target), quote=True)
        return f'<autoref identifier="{ident}" optional><code>{html.escape(title)}</code></autoref>'

    return ROLE.sub(sub, text)


def _walk(obj: griffe.Object, seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if obj.docstring is not None and ":" in obj.docstring.value:
        obj.docstring.value = _replace(obj, obj.docstring.value)
    for member in obj.members.values():
        if member.is_alias:
            continue
        _walk(member, seen)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx cross-reference roles in every docstring of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _walk(pkg, set())
