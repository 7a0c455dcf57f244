"""``set_tags``: a workflow changes its run's tags (search attributes) as it learns more —
the customer once identified, the priority once assessed. A durable call: recorded in the
run's log (``tags.set``) and replayed, never applied twice."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from .._codec import dumps
from ..engine.execution import current_execution
from ..engine.signals import current_step
from ..errors import UsageError
from ..models import EventType
from ..tags import check_tags, merge_tags

__all__ = ["set_tags"]


async def set_tags(tags: Mapping[str, str | None]) -> dict[str, str]:
    """Add or change the run's tags (a value of None removes that tag); returns all of the
    run's tags after the change. Durable when it returns: from then on the run is listed
    under its new tags (``list_runs(tag=...)``, ``GET /api/runs?tag=key:value``) and no
    longer under the ones it lost. Call it from the workflow body, not inside a step."""
    execution = current_execution.get()
    if execution is None:
        raise UsageError("set_tags() can only be used while a workflow runs on a worker")
    if current_step.get() is not None:
        raise UsageError(
            "set_tags() is for the workflow body (a step's body re-executes); call it "
            "before or after the step",
            run_id=execution.run_id,
        )
    changes = check_tags(tags, run_id=execution.run_id, removals=True)
    digest = hashlib.sha1(dumps(changes)).hexdigest()[:16]
    position, recorded = execution.check_call("set_tags", "", digest)
    if recorded is not None:
        return dict(execution.index.tags)
    merged = merge_tags(execution.index.tags, changes, run_id=execution.run_id)
    execution.record(
        EventType.TAGS_SET, {"seq": position, "digest": digest, "changes": changes, "tags": merged}
    )
    execution.writes.set_tags(dumps(merged))
    await execution.flush()
    return merged
