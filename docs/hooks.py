"""MkDocs hooks (mkdocs.yml `hooks:`): the changelog page shows CHANGELOG.md from the repository
root, so the changelog and the version it names stay in one file."""
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def on_page_read_source(page, config):
    """The text of docs/changelog.md is replaced by CHANGELOG.md's; other pages are read as usual."""
    if page.file.src_uri == "changelog.md":
        return CHANGELOG.read_text(encoding="utf-8")
    return None
