"""Query normalization, lexical tokens, the hashed embedding and exact cosine scores."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from prme_core.errors import InvalidInput
from prme_core.retrieval.embedding import (
    EmbeddingProvider,
    HashedEmbedding,
    cosine_scores,
    embedding_provider,
    row_norms,
)
from prme_core.retrieval.text import ENGLISH_STOPWORDS, LEXICAL_ANALYZER_ID, lexical_tokens, normalize_query

TEXTS = [
    "Caroline went to the LGBTQ support group on 8 May 2023.",
    "Melanie painted a sunrise over the lake last year.",
    "We switched the billing service to PostgreSQL 16 yesterday.",
    "Jon is opening a dance studio downtown.",
    "",
    "The team's new deploy tool is Argo; Jenkins was replaced.",
    "Caroline researched adoption agencies and counselling jobs.",
]


def _embedding_digest(texts: list[str]) -> str:
    return hashlib.sha256(HashedEmbedding().embed_documents(texts).tobytes()).hexdigest()


def test_normalize_query_casefolds_collapses_whitespace_and_strips():
    assert normalize_query("  THE SAME  Query ") == "the same query"
    assert normalize_query("a\t\nb\u00a0\u2003c") == "a b c"


def test_normalize_query_applies_nfkc_to_full_width_letters_and_ligatures():
    assert normalize_query("ＰＲＭＥ　Ｑｕｅｒｙ") == "prme query"
    assert normalize_query("ﬁle STRASSE Straße") == "file strasse strasse"


def test_lexical_tokens_drop_stopwords_punctuation_and_single_letters():
    assert lexical_tokens("Caroline's LGBTQ support group!") == ["caroline", "lgbtq", "support", "group"]
    assert lexical_tokens("What did I do on the 8th of May?") == ["8th"]


def test_lexical_tokens_keep_single_digits_and_split_on_underscores():
    assert lexical_tokens("Room 5 a b_c x2") == ["room", "5", "x2"]


def test_lexical_tokens_apply_nfkc_and_casefold():
    assert lexical_tokens("ＣＡＦÉ Größe") == ["café", "grösse"]


def test_stopword_list_is_lowercase_function_words_and_analyzer_is_named():
    assert 100 <= len(ENGLISH_STOPWORDS) <= 160
    assert all(w == w.casefold() and w.isalpha() for w in ENGLISH_STOPWORDS)
    assert {"the", "and", "what", "does"} <= ENGLISH_STOPWORDS and "caroline" not in ENGLISH_STOPWORDS
    assert LEXICAL_ANALYZER_ID == "prme-lexical-v1"


def test_hashed_embedding_is_an_embedding_provider_with_a_recorded_identity():
    embedder = HashedEmbedding(dimension=64)
    assert isinstance(embedder, EmbeddingProvider)
    assert embedder.dimension == 64
    assert embedder.identity() == {"provider": "prme.hashed", "model": "hashed-ngrams", "version": "1", "dimension": 64}


def test_hashed_embedding_shapes_and_dtype():
    embedder = HashedEmbedding()
    matrix = embedder.embed_documents(TEXTS)
    assert matrix.shape == (len(TEXTS), 384) and matrix.dtype == np.float32
    query = embedder.embed_query("support group")
    assert query.shape == (384,) and query.dtype == np.float32
    assert embedder.embed_documents([]).shape == (0, 384)


def test_hashed_embedding_holds_signed_integer_counts():
    matrix = HashedEmbedding().embed_documents(TEXTS)
    assert np.array_equal(matrix, np.round(matrix))
    assert (matrix < 0).any() and (matrix > 0).any()


def _expected_vector(features: dict[str, int], dimension: int) -> np.ndarray:
    vector = np.zeros(dimension, dtype=np.float32)
    for feature, weight in features.items():
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        vector[h % dimension] += -weight if h >> 63 else weight
    return vector


def test_hashed_features_are_prefixed_tokens_bigrams_and_padded_trigrams():
    features = {"u:support": 2, "u:group": 2, "b:support group": 1}
    features |= {
        f"c:{t}": 1 for t in ("<su", "sup", "upp", "ppo", "por", "ort", "rt>", "<gr", "gro", "rou", "oup", "up>")
    }
    vector = HashedEmbedding(dimension=1000).embed_query("The support, group!")
    assert vector.tobytes() == _expected_vector(features, 1000).tobytes()


def test_text_without_tokens_embeds_to_zero():
    assert not HashedEmbedding().embed_query("the, and! of?").any()


def test_hashed_embedding_is_identical_across_calls_and_batch_positions():
    embedder = HashedEmbedding()
    first = embedder.embed_documents(TEXTS)
    assert first.tobytes() == embedder.embed_documents(TEXTS).tobytes()
    assert np.array_equal(embedder.embed_documents(TEXTS[::-1])[::-1], first)
    assert np.array_equal(embedder.embed_query(TEXTS[2]), first[2])


def test_hashed_embedding_is_identical_across_processes_with_different_hash_seeds():
    script = (
        "import hashlib, sys; from prme_core.retrieval.embedding import HashedEmbedding; "
        "texts = sys.stdin.read().split('\\n'); "
        "print(hashlib.sha256(HashedEmbedding().embed_documents(texts).tobytes()).hexdigest())"
    )
    digests = set()
    for seed in ("1", "4242"):
        out = subprocess.run(
            [sys.executable, "-c", script],
            input="\n".join(TEXTS),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        digests.add(out.stdout.strip())
    assert digests == {_embedding_digest(TEXTS)}


@pytest.mark.parametrize("dimension", [15, 4097, 0, 38.4, True])
def test_hashed_embedding_rejects_a_dimension_outside_16_to_4096(dimension):
    with pytest.raises(InvalidInput, match="dimension"):
        HashedEmbedding(dimension=dimension)


def test_embed_documents_rejects_a_bare_string():
    with pytest.raises(InvalidInput, match="texts"):
        HashedEmbedding().embed_documents("one text")


def test_identical_text_has_cosine_one():
    embedder = HashedEmbedding()
    matrix = embedder.embed_documents(TEXTS)
    query = embedder.embed_query(TEXTS[0])
    scores = cosine_scores(matrix, row_norms(matrix), query, float(row_norms(query[None, :])[0]))
    assert scores[0] == 1.0
    assert scores.dtype == np.float64 and np.all(np.abs(scores) <= 1.0)


def test_disjoint_text_has_cosine_near_zero():
    embedder = HashedEmbedding()
    a = embedder.embed_documents(["xylophone quartz zebra"])
    b = embedder.embed_query("mountain bicycle festival")
    assert abs(cosine_scores(a, row_norms(a), b, float(np.linalg.norm(b)))[0]) < 0.2


def test_cosine_is_zero_where_either_norm_is_zero():
    embedder = HashedEmbedding()
    matrix = embedder.embed_documents(["support group", ""])
    query = embedder.embed_query("support group")
    assert cosine_scores(matrix, row_norms(matrix), query, float(np.linalg.norm(query)))[1] == 0.0
    zero = np.zeros(384, dtype=np.float32)
    assert not cosine_scores(matrix, row_norms(matrix), zero, 0.0).any()


def test_related_texts_score_above_unrelated_ones():
    embedder = HashedEmbedding()
    matrix = embedder.embed_documents(TEXTS)
    query = embedder.embed_query("When did Caroline go to the support group?")
    scores = cosine_scores(matrix, row_norms(matrix), query, float(np.linalg.norm(query)))
    assert int(np.argmax(scores)) == 0


def test_cosine_scores_are_bit_identical_when_rows_are_permuted():
    embedder = HashedEmbedding()
    words = "support group adoption lake sunrise billing service studio dance caroline melanie jon".split()
    rng = np.random.default_rng(11)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 40)))) for _ in range(500)]
    matrix = embedder.embed_documents(texts)
    query = embedder.embed_query("caroline support group dance")
    qnorm = float(row_norms(query[None, :])[0])
    expected = cosine_scores(matrix, row_norms(matrix), query, qnorm)
    perm = rng.permutation(len(texts))
    permuted = np.ascontiguousarray(matrix[perm])
    got = np.empty_like(expected)
    got[perm] = cosine_scores(permuted, row_norms(permuted), query, qnorm)
    assert got.tobytes() == expected.tobytes()


def test_row_norms_are_float64_euclidean_norms():
    matrix = np.array([[3, 4, 0], [0, 0, 0], [1, 2, 2]], dtype=np.float32)
    norms = row_norms(matrix)
    assert norms.dtype == np.float64 and norms.tolist() == [5.0, 0.0, 3.0]


def test_cosine_scores_reject_mismatched_shapes():
    matrix = np.ones((3, 4), dtype=np.float32)
    with pytest.raises(InvalidInput, match="shapes"):
        cosine_scores(matrix, row_norms(matrix), np.ones(5, dtype=np.float32), 1.0)


def test_cosine_of_integer_vectors_beyond_float32_range_is_still_exact():
    rng = np.random.default_rng(3)
    matrix = rng.integers(-5000, 5000, size=(40, 16)).astype(np.float32)
    query = rng.integers(-5000, 5000, size=16).astype(np.float32)
    norms, qnorm = row_norms(matrix), float(row_norms(query[None, :])[0])
    exact_dots = np.array([sum(int(a) * int(b) for a, b in zip(row, query)) for row in matrix], dtype=np.float64)
    expected = np.clip(exact_dots / (norms * qnorm), -1.0, 1.0)
    assert cosine_scores(matrix, norms, query, qnorm).tobytes() == expected.tobytes()


def test_embedding_provider_by_name_is_one_instance_per_process():
    assert isinstance(embedding_provider("hashed"), HashedEmbedding)
    assert embedding_provider("hashed") is embedding_provider("hashed")


def test_embedding_provider_rejects_an_unknown_name_naming_the_choices():
    with pytest.raises(InvalidInput, match="embedding.*hashed, minilm"):
        embedding_provider("word2vec")
