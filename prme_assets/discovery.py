"""Discovery: a partition key for every (owner, scope set) that receives relevance feedback.

The cursor is the operations-log sequence already scanned. Each tick re-reads a small window
behind it (``RESCAN_WINDOW`` sequence numbers): on PostgreSQL a sequence number is taken at
insert time but becomes visible at commit, so a slow transaction can land behind the cursor;
re-reading is harmless because only keys the instance lacks are added.
"""

import dagster as dg

from prme_assets.partitions import LEARNING_TARGETS, encode_target
from prme_assets.resources import PrmeStoreResource
from prme_core.learning.discovery import feedback_scope_sets_since

RESCAN_WINDOW = 1000
TICK_LIMIT = 5000


@dg.sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Adds a learning-target partition for each new (owner, scope set) with feedback.",
)
def learning_target_discovery_sensor(context: dg.SensorEvaluationContext, prme_store: PrmeStoreResource):
    after = int(context.cursor or 0)
    with prme_store.client() as client:
        found = feedback_scope_sets_since(client.store, max(0, after - RESCAN_WINDOW), limit=TICK_LIMIT)
    known = set(context.instance.get_dynamic_partitions(LEARNING_TARGETS.name))
    new = sorted({encode_target(owner, scopes) for owner, scopes, _ in found} - known)
    cursor = str(max([after, *(seq for *_, seq in found)]))
    if not new:
        return dg.SensorResult(skip_reason=f"no new learning targets (cursor {cursor})", cursor=cursor)
    context.log.info(f"adding {len(new)} learning targets: {', '.join(new[:10])}")
    return dg.SensorResult(dynamic_partitions_requests=[LEARNING_TARGETS.build_add_request(new)], cursor=cursor)
