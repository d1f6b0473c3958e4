"""The documentation site builds with ``mkdocs build --strict`` (a broken
link, a page missing from the navigation's targets or a generated reference
that fails to render is an error), and the README stays a short front page."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.docs.blocks import ROOT


# The build reads no database: once per suite run (the SQLite pass) is enough.
@pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB", "sqlite") != "sqlite",
                    reason="runs in the SQLite pass (the site does not depend on the database)")
def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    # The generated references are there, rendered from the code.
    placement = (site / "reference" / "placement-api" / "index.html").read_text()
    assert "/allocation_candidates" in placement and "placement:reshaper:reshape" in placement
    assert "/selections" in (site / "reference" / "scheduler-api" / "index.html").read_text()
    assert "/v2.1/servers" in (site / "reference" / "compute-api" / "index.html").read_text()
    commands = (site / "reference" / "commands" / "index.html").read_text()
    assert "billeting scheduler serve" in commands and "--port-base" in commands


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    first_block = re.search(r"```\w*\n(.*?)```", text, re.S)[1]
    assert "./dev.sh up" in first_block and "./dev.sh test" in first_block


def test_the_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    targets = [link for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) if "://" not in link]
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_design_references_point_into_docs():
    """Code cites design pages by path; each path (and its anchor) exists."""
    cited = set()
    for path in [*(ROOT / "billeting").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        cited.update((path, m[1], m[2]) for m in re.finditer(r"docs/([\w/.-]+\.md)(?:#([\w-]+))?",
                                                             path.read_text(encoding="utf-8")))
    assert cited
    missing = []
    for source, page, anchor in sorted(cited):
        target = ROOT / "docs" / page
        if not target.exists():
            missing.append(f"{source.relative_to(ROOT)}: docs/{page}")
        elif anchor and anchor not in _anchors(target.read_text(encoding="utf-8")):
            missing.append(f"{source.relative_to(ROOT)}: docs/{page}#{anchor}")
    assert not missing, "\n".join(missing)


# Citations of documents that are not in the repository.
OUTSIDE = re.compile(r"\bspec §?\d+(\.\d+)+|\bscheduler-design\b|\bdesign document \d|\b[Qq]uirk Q\d+|shared/docs")


def test_no_citations_of_documents_outside_the_repository():
    """What the code cites is in docs/ (say docs/design/placement-model.md#inventory)."""
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in [*(ROOT / "billeting").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
             if path.name != "test_site.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if OUTSIDE.search(line)]
    assert not found, "\n".join(found)


def _anchors(markdown: str) -> set[str]:
    """Heading ids as MkDocs makes them: an explicit ``{#id}``, else the slug."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, re.M):
        explicit = re.search(r"\{#([\w-]+)\}\s*$", heading)
        if explicit:
            found.add(explicit[1])
            continue
        text = re.sub(r"[`*]", "", heading).strip().lower()
        found.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text)))
    return found
