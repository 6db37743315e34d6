"""The docs hold together: every relative link and anchor in them resolves, the README's contents list its
sections, and docs/architecture.md names every module of ptyd/ (so the map cannot drift from the tree)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

DOCS = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "clients").glob("*/README.md"),
        *(ROOT / "tests").glob("*/README.md"),
        ROOT / "bench" / "BASELINE.md",
    ]
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(FENCE.sub("", path.read_text()))]


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    broken = []
    for link in links(doc):
        if re.match(r"[a-z]+:", link):
            continue  # https:, mailto: ...
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(f"{link}: no {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_the_readmes_contents_list_every_section_in_order() -> None:
    text = FENCE.sub("", (ROOT / "README.md").read_text())
    sections = [h for h in re.findall(r"^## (.*)$", text, re.M) if h != "Contents"]
    contents = text.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- \[(.*?)\]\(#(.*?)\)", contents, re.M)
    assert [title for title, _ in listed] == sections
    assert all(anchor == slug(title) for title, anchor in listed)


def tree_paths(tree: str) -> set[str]:
    """The paths a tree drawing names: two spaces of indent per level, names before the description (a line
    deeper than any name is a description's continuation), several names joined by commas."""
    paths: set[str] = set()
    stack: list[str] = []
    for line in tree.strip("`\n").splitlines():
        depth = (len(line) - len(line.lstrip())) // 2
        if depth > len(stack):
            continue
        names = re.match(r"\s*((?:[\w.]+/?(?:, )?)+)", line)
        assert names, line
        del stack[depth:]
        entries = [n.strip() for n in names.group(1).split(",") if n.strip()]
        for entry in entries:
            paths.add("/".join([*stack, entry.rstrip("/")]))
        if entries[-1].endswith("/"):
            stack.append(entries[-1].rstrip("/"))
    return paths


def test_architecture_names_every_module_of_ptyd() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    tree = text.split("## The tree", 1)[1].split("\n## ", 1)[0]
    drawn = tree_paths(re.search(r"```\n(.*?)```", tree, re.S).group(1))  # type: ignore[union-attr]
    modules = set()
    for module in (ROOT / "ptyd").rglob("*.py"):
        relative = module.relative_to(ROOT)
        if module.name == "__init__.py":
            modules.add(str(relative.parent))  # a package is named by its folder
        elif module.name != "__main__.py":
            modules.add(str(relative))
    assert not sorted(modules - drawn), f"docs/architecture.md does not name {sorted(modules - drawn)}"
    assert not sorted(p for p in drawn - modules if p.endswith(".py")), "it names modules that do not exist"
