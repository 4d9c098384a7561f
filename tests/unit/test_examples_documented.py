"""The README shows each example of examples/ whole, as the suite runs it: an edit to one
that is not made to the other fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.name != "__init__.py")


def test_there_is_an_example_per_framework() -> None:
    names = {p.name for p in EXAMPLES}
    expected = {"langgraph_approval.py", "openai_agents_approval.py", "pydantic_ai_approval.py"}
    assert expected <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_readme_shows_the_example_whole(example: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"```python\n{example.read_text()}```" in readme


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_suite_runs_the_example(example: Path) -> None:
    tests = "".join(p.read_text() for p in (ROOT / "tests" / "client").glob("test_example_*.py"))
    assert f'"{example.name}"' in tests
