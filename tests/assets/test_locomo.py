"""LoCoMo reader and the main job on real data (skipped with a message where the data is absent)."""

from prme_core import MemoryClient
from prme_core.datasets.locomo import load_conversation, read_locomo
from tests.locomo_data import DATA, needs_data


@needs_data
def test_development_file_has_the_documented_shape():
    conversations = read_locomo(DATA)
    assert [c.sample_id for c in conversations] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44"]
    assert sum(len(c.turns) for c in conversations) == 3435
    assert sum(len(c.questions) for c in conversations) == 1157
    unresolved = [ref for c in conversations for q in c.questions for ref in c.resolve(q)[1]]
    assert len(unresolved) == 3


@needs_data
def test_turns_become_dated_memories_with_deterministic_ids():
    conv = read_locomo(DATA)[0]
    first, again = conv.memories(), conv.memories()
    assert [m.id for m in first] == [m.id for m in again]
    m = first[0]
    assert m.content.startswith(conv.turns[0].speaker + ": ")
    assert m.event_time.tzinfo is not None and m.session_id == "conv-26:session_1"
    assert any("[image:" in x.content for x in first)


@needs_data
def test_loading_twice_adds_nothing_the_second_time(tmp_path):
    conv = read_locomo(DATA)[1]
    with MemoryClient(f"duckdb:///{tmp_path / 'x.duckdb'}") as client:
        assert load_conversation(client, conv) == len(conv.turns)
        assert load_conversation(client, conv) == 0
        assert sum(1 for _ in client.iterate(conv.sample_id)) == len(conv.turns)


@needs_data
def test_main_command_runs_on_the_embedded_default(tmp_path, monkeypatch, capsys):
    from prme_assets.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("PRME_STORE_URL", raising=False)
    assert main(["main", "--conversation", "conv-30"]) == 0
    out = capsys.readouterr().out
    assert "| conv-30::personal |" in out and "1 learning targets" in out
    assert (tmp_path / ".prme" / "prme.duckdb").is_file()
    assert (tmp_path / ".dagster_home" / "dagster.yaml").is_file()
