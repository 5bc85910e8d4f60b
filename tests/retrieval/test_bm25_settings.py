"""BM25 parameters are an engine setting (issue 15, item 1): bounded, recorded in the feature
identity, and a corpus built under other parameters is never served."""

import pytest
from pydantic import ValidationError

from prme_core.engine import MemoryClient
from prme_core.retrieval.bm25 import Bm25Parameters
from prme_core.retrieval.corpus import CorpusCache, lexical_identity
from prme_core.retrieval.embedding import HashedEmbedding
from prme_core.retrieval.execution import execution_features, feature_identity_sha256
from prme_core.retrieval.tokenizer import tokenizer_identity
from prme_core.settings import EngineSettings

OWNER = "alice"


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"k1": 5.01}, "bm25.k1"),
        ({"k1": -0.1}, "bm25.k1"),
        ({"b": 1.5}, "bm25.b"),
        ({"b": -0.01}, "bm25.b"),
        ({"method": "okapi"}, "bm25.method"),
        ({"k3": 1.0}, "bm25.k3"),
    ],
)
def test_out_of_bounds_bm25_settings_are_refused_naming_the_field(values, field):
    with pytest.raises(ValidationError) as caught:
        EngineSettings(bm25=values)
    assert field in str(caught.value)


def test_bm25_bounds_are_inclusive():
    assert Bm25Parameters(k1=0.0, b=0.0).as_parameters() == {"k1": 0.0, "b": 0.0, "method": "lucene"}
    assert Bm25Parameters(k1=5.0, b=1.0).k1 == 5.0


def _identity(bm25: Bm25Parameters) -> str:
    embedder = HashedEmbedding()
    return feature_identity_sha256(
        execution_features(
            backend="duckdb",
            storage_class="DuckDBStore",
            embedding=embedder.identity(),
            lexical=lexical_identity(bm25),
            tokenizer=tokenizer_identity(),
        )
    )


def test_feature_identity_differs_when_bm25_parameters_differ():
    default = Bm25Parameters()
    assert lexical_identity(default)["k1"] == default.k1 and lexical_identity(default)["b"] == default.b
    assert _identity(default) == _identity(Bm25Parameters(k1=default.k1, b=default.b))
    assert _identity(default) != _identity(Bm25Parameters(k1=default.k1 + 0.1, b=default.b))
    assert _identity(default) != _identity(Bm25Parameters(k1=default.k1, b=default.b / 2))


def test_corpus_cache_builds_with_its_parameters_and_rebuilds_when_they_change(tmp_path):
    with MemoryClient(f"duckdb:///{tmp_path / 'prme.duckdb'}") as client:
        client.store_batch(
            OWNER,
            [
                "Alice: the cat Miso sleeps all day",
                "Alice: Miso Miso Miso the cat",
                "Bob: the dog Rex runs in the park every single morning before work",
            ],
        )
        cache = CorpusCache(client.store, client.pipeline.embedder, bm25=Bm25Parameters(k1=1.5, b=0.75))
        first = cache.get(OWNER)
        assert first.lexical.bm25 == Bm25Parameters(k1=1.5, b=0.75)
        assert cache.get(OWNER) is first  # same revision, same parameters: reused
        cache.bm25 = Bm25Parameters(k1=0.3, b=0.1)
        second = cache.get(OWNER)
        assert second is not first and second.lexical.bm25 == Bm25Parameters(k1=0.3, b=0.1)
        query = ["miso"]
        assert list(first.lexical.scores(query)) != list(second.lexical.scores(query))


def test_default_settings_record_the_default_bm25_parameters(tmp_path):
    with MemoryClient(f"duckdb:///{tmp_path / 'prme.duckdb'}") as client:
        client.store_memory(OWNER, "Alice: the cat Miso sleeps all day")
        response = client.retrieve("Miso", owner=OWNER)
        recorded = response.receipt.execution.features["lexical"]
        assert (recorded["k1"], recorded["b"], recorded["method"]) == (
            client.settings.bm25.k1,
            client.settings.bm25.b,
            client.settings.bm25.method,
        )


def test_engine_bm25_settings_reach_the_index_and_every_receipt(tmp_path):
    settings = EngineSettings(store_url=f"duckdb:///{tmp_path / 'prme.duckdb'}", bm25={"k1": 0.5, "b": 0.25})
    with MemoryClient(settings=settings) as client:
        client.store_memory(OWNER, "Alice: the cat Miso sleeps all day")
        response = client.retrieve("Miso", owner=OWNER)
        assert client.pipeline.corpora.get(OWNER).lexical.bm25 == settings.bm25
        recorded = response.receipt.execution.features["lexical"]
        assert (recorded["k1"], recorded["b"]) == (0.5, 0.25)
        with MemoryClient(store=client.store) as default:
            assert default.running_feature_identity() != client.running_feature_identity()
