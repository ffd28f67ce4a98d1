"""The Python examples of the README and the docs run as written, their claims about the ledger
hold, and the test command they show is the one CI runs."""
import re
import tomllib
from pathlib import Path

import pytest

import dp
from dp import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PYTHON_API = ROOT / "docs" / "python-api.md"      # the longer examples


@pytest.mark.parametrize("page", [README, PYTHON_API], ids=lambda p: p.name)
def test_readme_python_example_runs(page):
    code = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    assert code, f"{page.name} has no python example"
    scope: dict = {}
    exec(compile(code[0].replace("print(", "(lambda *a: None)("), page.name, "exec"), scope)
    rel, rect = scope["rel"], scope["rect"]
    assert abs(rel.ledger.total - 1.0) < 1e-12          # "sums to 1.0"
    lo, hi = rel.interval(rect)
    assert lo < rel.answer(rect) < hi
    assert scope["geojson"]["features"]


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "getting-started.md", ROOT / "docs" / "benchmarks.md"],
                         ids=lambda p: p.name)
def test_readme_test_command_is_what_ci_runs(page):
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(line for line in ci.splitlines() if line.startswith("(command -v chromedriver"))
    assert command in page.read_text()


def test_readme_accountant_example_refuses_past_the_total():
    import textwrap

    import pytest

    import dp
    blocks = re.findall(r"```python\n(.*?)```", PYTHON_API.read_text(), re.S)
    block = textwrap.dedent(next(b for b in blocks if "dp.Accountant(total=3)" in b))
    *first, last = block.strip().splitlines()
    data, domain = dp.load_sample("small_city_5k")
    scope = {"dp": dp, "data": data, "domain": domain}
    exec("\n".join(first), scope)
    assert scope["acc"].spent == 1.0 and scope["acc"].remaining == 2.0   # "spent 1 of 3"
    with pytest.raises(dp.BudgetError, match="only 2 of this dataset's total budget of 3"):
        exec(last, scope)


def test_the_version_is_in_one_place_and_the_changelog_names_it(capsys):
    # pyproject.toml holds it; the package, the command line and the changelog's newest entry agree
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert dp.__version__ == version
    newest = re.search(r"^## (\S+) \(\d{4}-\d\d-\d\d\)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert newest and newest.group(1) == version
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"python -m dp {version}"
