"""The README's Python tour, run as written: its learning half activates a profile, and running
it again stores, judges, registers and creates nothing twice."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from prme_core import MemoryClient

README = Path(__file__).resolve().parent.parent / "README.md"


def tour_code() -> str:
    """The first ``python`` block under the "Five-minute tour (Python)" heading."""
    text = README.read_text("utf-8")
    section = text[text.index("## Five-minute tour (Python)") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the README's Python tour has no python block"
    return match.group(1)


def _state(store: Path) -> dict:
    with MemoryClient(f"duckdb:///{store}") as client:
        active = client.get_active_ranking_profile("alice", ["personal"])
        return {
            "memories": sum(1 for _ in client.iterate("alice", page_size=1000)),
            "judgments": len(client.list_relevance("alice", limit=1000)),
            "holdout_queries": len(client.list_holdout_queries("alice", ["personal"])),
            "profiles": len(client.list_ranking_profiles("alice", limit=100)),
            "active": None if active is None else active.profile_id,
        }


def test_readme_tour_learns_a_profile_and_a_second_run_duplicates_nothing(tmp_path):
    script = tmp_path / "tour.py"
    script.write_text(tour_code(), "utf-8")
    first = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert first.returncode == 0, first.stderr
    assert "offline: improved_on_observed_candidates" in first.stdout
    assert "holdout: improved_full_retrieval" in first.stdout
    assert "applied → The gadget 7 repair costs forty dollars" in first.stdout
    after_first = _state(tmp_path / ".prme" / "tour.duckdb")
    assert after_first["active"] is not None and after_first["profiles"] == 1
    assert after_first["memories"] == 3 + 2 * 160 and after_first["judgments"] == 1 + 160
    assert after_first["holdout_queries"] == 160

    second = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert second.returncode == 0, second.stderr
    assert "applied → The gadget 7 repair costs forty dollars" in second.stdout
    assert _state(tmp_path / ".prme" / "tour.duckdb") == after_first
