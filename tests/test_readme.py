"""The README reads in five minutes, and the design notes it points to are where it says.

The README keeps what a user needs (what Lumber is, the two commands, the demo, the CLI, configuration,
deploying, HDFS, security, benchmarks) under a line budget, with a table of contents; each part's design
notes live in ``docs/<part>.md``, linked from the README. Every relative link in the README and in docs/
resolves to a file that exists, and a ``#anchor`` to a heading of it, with anchors made as GitHub makes
them. Sample output in the README and in docs/ is copied from a real run and never cut by a line of "...".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

README_LINE_BUDGET = 400
"""Lines the README may have: about five minutes of reading."""

DESIGN_PARTS = (
    "storage",
    "replication",
    "groups",
    "loads",
    "audit",
    "console",
    "completeness",
    "reassignment",
    "clients",
    "registry",
    "mirror",
    "testing",
    "development",
)
"""docs/<part>.md for each part whose design notes left the README."""


FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    lines = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def code_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the opening fence, the block's lines) of each fenced block."""
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            if current is None:
                current, start = [], number
            else:
                blocks.append((start, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped but ``-`` and ``_``, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(text: str) -> list[tuple[int, str]]:
    """(level, text) of each ATX heading outside code blocks."""
    found = []
    for _, line in prose_lines(text):
        match = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


def anchors(text: str) -> set[str]:
    """Every heading's anchor, the second of a name as ``name-1`` and so on, as GitHub numbers them."""
    seen: dict[str, int] = {}
    result = set()
    for _, heading in headings(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of each Markdown link outside code blocks and code spans."""
    return [
        (number, match.group(2))
        for number, line in prose_lines(text)
        for match in LINK.finditer(CODE_SPAN.sub("", line))
    ]


def table_of_contents(text: str) -> list[str]:
    """The link targets of the list under the README's ``## Contents`` heading."""
    lines = text.splitlines()
    start = lines.index("## Contents")
    targets = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        targets += [match.group(2) for match in LINK.finditer(line)]
    return targets


def test_the_readme_opens_with_a_table_of_contents_of_its_sections() -> None:
    text = README.read_text()
    assert "## Contents" in text.splitlines()[:30], (
        "README.md: no '## Contents' heading in its first 30 lines"
    )
    toc = table_of_contents(text)
    sections = [slug(heading) for level, heading in headings(text) if level == 2 and heading != "Contents"]
    assert [target.removeprefix("#") for target in toc] == sections, (
        "README.md: the contents should list every section (## heading) in order, each as a #link"
    )
    unresolved = [target for target in toc if target.removeprefix("#") not in anchors(text)]
    assert unresolved == [], f"README.md: contents links with no heading: {unresolved}"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    text = path.read_text()
    broken = []
    for number, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not linked.exists():
            broken.append(
                f"{where}: no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked}"
            )
            continue
        if anchor and anchor not in anchors(linked.read_text()):
            broken.append(f"{where}: no heading with anchor '#{anchor}' in {linked.relative_to(ROOT)}")
    assert broken == []


def test_the_readme_stays_under_its_line_budget() -> None:
    count = len(README.read_text().splitlines())
    assert count <= README_LINE_BUDGET, (
        f"README.md has {count} lines, over its budget of {README_LINE_BUDGET}: move design notes to docs/"
    )


@pytest.mark.parametrize("part", DESIGN_PARTS)
def test_each_part_has_its_design_notes_file_linked_from_the_readme(part: str) -> None:
    assert (ROOT / "docs" / f"{part}.md").is_file(), f"docs/{part}.md is missing"
    linked = {target.partition("#")[0] for _, target in links(README.read_text())}
    assert f"docs/{part}.md" in linked, f"README.md does not link docs/{part}.md"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_sample_output_is_cut_with_an_ellipsis_line(path: Path) -> None:
    cut = [
        f"{path.relative_to(ROOT)}:{start + offset}: {line.strip()!r}"
        for start, block in code_blocks(path.read_text())
        for offset, line in enumerate(block, 1)
        if line.strip() in ("...", "…")
    ]
    assert cut == [], "sample output is copied from a real run, whole; these lines cut it"
