"""The documentation builds with `mkdocs build --strict`, every page in its nav is built, and the
README's relative links lead to files that exist."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def nav_pages(nav) -> list[str]:
    """The Markdown files a mkdocs nav lists, in order (sections flattened)."""
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def built_page(site: Path, page: str) -> Path:
    """Where mkdocs writes a page with directory URLs: index.md -> index.html, a.md -> a/index.html."""
    stem = page[:-len(".md")]
    return site / ("index.html" if stem == "index" else f"{stem}/index.html")


def test_the_docs_build_strict_with_every_page_in_the_nav(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    import yaml       # mkdocs depends on PyYAML

    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr        # strict: any warning fails the build
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = nav_pages(config["nav"])
    assert sorted(pages) == sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")), \
        "every page in docs/ is in the nav, and the nav names no missing page"
    for page in pages:
        assert built_page(site, page).is_file(), f"{page} was not built"
    # the changelog page shows CHANGELOG.md itself (docs/hooks.py), whose newest entry names the version
    newest = re.search(r"^## (\S+) \(", (ROOT / "CHANGELOG.md").read_text(), re.M).group(1)
    assert f"{newest} (" in built_page(site, "changelog.md").read_text()
    assert not list(site.rglob("*.py")), "docs/*.py are build tools, not pages"


def test_every_relative_link_in_the_readme_leads_to_a_file():
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    relative = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]
    assert relative, "the README links to no file"
    missing = [t for t in relative if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
