"""The real-data session page's generator still runs end to end (it drives a real browser)."""
import shutil
import sys
from pathlib import Path

import pytest

import dp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import real_session  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.skipif(not real_session.MATRIX.is_file(),
                    reason="needs the DPBench cabspottingS matrix in the shared data folder beside the repository")
@pytest.mark.skipif(not shutil.which("chromedriver"), reason="needs chromium and chromedriver on PATH")
def test_the_session_page_is_generated_with_every_screenshot(tmp_path):
    md = real_session.main(["--out", str(tmp_path)])
    text = md.read_text()
    pngs = sorted(p.name for p in tmp_path.glob("session_*.png"))
    assert len(pngs) == 5 and all(f"({name})" in text for name in pngs)
    label = dp.mechanisms()[dp.recommend("points").name].label
    assert "464,040 points" in text and f"Released {label}" in text
    assert all((tmp_path / name).stat().st_size > 20_000 for name in pngs)   # real images, not blank
