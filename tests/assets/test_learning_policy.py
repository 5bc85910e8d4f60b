"""One copy of each threshold: the Dagster learning policy's defaults are ``prme_core``'s."""

from prme_assets.resources import HOLDOUT_FIELDS, LearningPolicyResource
from prme_core.learning.config import LearningConfig
from prme_core.learning.full_retrieval import FullRetrievalEvaluationConfig
from prme_core.learning.snapshot import DEFAULT_MAX_RECORDS


def test_the_learning_policy_defaults_are_the_prme_core_config_defaults():
    policy = LearningPolicyResource()
    learning, holdout = LearningConfig().resolved(), FullRetrievalEvaluationConfig().resolved()
    as_config = policy.learning_config()
    for field in LearningConfig.model_fields:
        assert getattr(as_config, field) == getattr(learning, field), field
        assert field in type(policy).model_fields, field
    for field, name in HOLDOUT_FIELDS.items():
        assert getattr(policy, name) == getattr(holdout, field), name
    # the look, the proposal's number and offline level are the store's, the cap is the rule's and
    # the level is derived from them and the budget: never a policy
    derived = {"look", "max_p_value", "offline_look", "offline_alpha", "level_cap"}
    assert set(HOLDOUT_FIELDS) == set(FullRetrievalEvaluationConfig.model_fields) - derived
    assert policy.max_records == DEFAULT_MAX_RECORDS


def test_the_default_learning_policy_builds_the_default_prme_core_configs():
    policy = LearningPolicyResource()
    assert policy.learning_config() == LearningConfig().resolved()
    assert policy.holdout_config().resolved() == FullRetrievalEvaluationConfig().resolved()


def test_every_policy_field_sets_a_prme_core_config_field_or_the_snapshot_bound():
    mapped = set(LearningConfig.model_fields) | set(HOLDOUT_FIELDS.values()) | {"max_records"}
    assert set(LearningPolicyResource.model_fields) == mapped


def test_the_policy_overrides_reach_the_prme_core_configs():
    policy = LearningPolicyResource(min_training_queries=10, holdout_min_query_groups=7, seed=3)
    assert policy.learning_config().min_training_queries == 10 and policy.learning_config().seed == 3
    holdout = policy.holdout_config(min_ndcg_gain=0.05, k=None)
    assert (holdout.min_query_groups, holdout.seed, holdout.min_ndcg_gain, holdout.k) == (7, 3, 0.05, 10)
