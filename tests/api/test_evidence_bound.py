"""Profiles only from the store's own evidence, over a real server (both backends): a genuine
proposal and holdout pair whose multipliers were edited — checksums recomputed so both still
load — is refused over HTTP and MCP; the pair as the server returned it makes a profile."""

from __future__ import annotations

import anyio
import pytest

from prme_core.learning.full_retrieval import FullRetrievalEvaluation
from prme_core.learning.full_retrieval import _input_checksum as holdout_input_checksum
from prme_core.learning.proposal import LearningEvaluation
from tests.api.conftest import ApiServer
from tests.learning_lab import HOLDOUT_CONFIG, LEARNING_CONFIG, build_lab

OWNER = "erin"


@pytest.fixture(scope="module")
def evidence(api: ApiServer) -> tuple[str, dict, dict]:
    build_lab(api.client, owner=OWNER)
    key = api.client.create_api_key(OWNER, role="operator").api_key
    with api.http(key) as http:
        proposal = http.post("/v1/learning/evaluate", json={"scopes": ["personal"], "config": LEARNING_CONFIG})
        assert proposal.status_code == 200, proposal.text
        holdout = http.post("/v1/learning/holdout", json={"proposal": proposal.json(), "config": HOLDOUT_CONFIG})
        assert holdout.status_code == 200, holdout.text
    assert proposal.json()["decision"] == "improved_on_observed_candidates"
    assert holdout.json()["decision"] == "improved_full_retrieval"
    return key, proposal.json(), holdout.json()


def forged(proposal: dict, holdout: dict) -> tuple[dict, dict]:
    """The pair with the lexical multiplier raised, both reports still self-consistent."""
    p = LearningEvaluation.model_validate(proposal)
    edited = p.multipliers.model_copy(update={"lexical": min(4.0, p.multipliers.lexical * 1.5 + 0.1)})
    p2 = LearningEvaluation.model_validate({**p.model_dump(mode="json"), "multipliers": edited.model_dump(mode="json")})
    h = FullRetrievalEvaluation.model_validate(holdout)
    draft = h.model_copy(update={"candidate_multipliers": edited})
    h2 = FullRetrievalEvaluation.model_validate(
        {**draft.model_dump(mode="json"), "input_checksum": holdout_input_checksum(draft)}
    )
    return p2.model_dump(mode="json"), h2.model_dump(mode="json")


def test_an_edited_report_pair_is_refused_over_http_and_the_genuine_one_is_accepted(api, evidence):
    key, proposal, holdout = evidence
    fake_proposal, fake_holdout = forged(proposal, holdout)
    before = api.rows()
    with api.http(key) as http:
        refused = http.post("/v1/profiles", json={"proposal": fake_proposal, "holdout": fake_holdout})
        assert refused.status_code == 422, refused.text
        assert "not a report this store produced" in refused.json()["error"]["message"]
        assert api.rows() == before  # nothing written
        accepted = http.post("/v1/profiles", json={"proposal": proposal, "holdout": holdout})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["multipliers"] == proposal["multipliers"]


def test_an_edited_report_pair_is_refused_over_mcp(api, evidence):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    key, proposal, holdout = evidence
    fake_proposal, fake_holdout = forged(proposal, holdout)

    async def run():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
            async with streamable_http_client(f"{api.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool(
                        "memory_create_ranking_profile", {"proposal": fake_proposal, "holdout": fake_holdout}
                    )

    result = anyio.run(run)
    assert result.is_error and result.structured_content["error"]["status"] == 422
    assert "not a report this store produced" in result.structured_content["error"]["message"]
