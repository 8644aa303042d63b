"""Writing annotations (a deploy marker, an incident note) on the role-and-audit path of every action.

Who may: :data:`~streams_app.services.audit.ACTION_ROLES` says ``annotation.create`` needs the operator
role, as Grafana gives annotations to editors and not to viewers: what they write shows on every
chart of its scope, for everyone. Annotations are the console's own records, not Redis state, so
read-only mode allows them (:data:`~streams_app.services.audit.READ_ONLY_ALLOWED`): an incident on a
read-only console still gets its notes. Each attempt leaves exactly one AuditEvent.

Input arrives validated by the screen (the API's pydantic model, the timeline's form); the checks here
are the ones both share and that need the settings: a configured connection, a span the right way
round and no longer than :data:`SPAN_MAX`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings

from eventbus.text import display_text
from streams_app.annotations.models import KEY_TEXT_MAX, TEXT_MAX, Annotation
from streams_app.metrics.models import name_hash
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

ACTION = "annotation.create"
#: The longest span an annotation may cover (an incident, a maintenance window).
SPAN_MAX = timedelta(days=31)


def annotation_create(
    *,
    user: UserLike | None,
    at: datetime,
    end_at: datetime | None = None,
    text: str,
    tags: Sequence[str] = (),
    conn: str = "",
    key: bytes | None = None,
) -> Annotation:
    """Write one annotation at ``at`` (or over ``at`` to ``end_at``), shown on every chart of its scope:
    every connection (``conn`` blank), ``conn``, or the stream ``key`` of ``conn``."""
    end_at = end_at or at
    params: dict[str, Any] = {
        "time": at.isoformat(),
        "time_end": end_at.isoformat() if end_at != at else None,
        "tags": list(tags),
        "text": text[:200],
    }
    with action_audit(user=user, conn=conn, action=ACTION, stream=key, params=params,
                      target="" if key is not None else f"annotation on {conn or 'every connection'}") as record:
        if key is not None and not conn:
            raise InvalidArgument("A stream's annotation names its connection too.")
        if conn and conn not in settings.BUS_REDIS_URLS:
            raise InvalidArgument(f"No connection named {conn!r} is configured.")
        if end_at < at:
            raise InvalidArgument("The span ends before it begins: time_end must not be before time.")
        if end_at - at > SPAN_MAX:
            raise InvalidArgument(f"A span covers at most {SPAN_MAX.days} days.")
        if not text.strip() or len(text) > TEXT_MAX:
            raise InvalidArgument(f"An annotation's text is 1 to {TEXT_MAX} characters.")
        annotation = Annotation.objects.create(
            at=at,
            end_at=end_at,
            text=text,
            tags=list(dict.fromkeys(tags)),
            connection=conn,
            key=key,
            key_hash=name_hash(key) if key is not None else "",
            key_text=display_text(key)[:KEY_TEXT_MAX] if key is not None else "",
            created_by=user if user is not None and user.is_authenticated else None,
            username=user.get_username() if user is not None and user.is_authenticated else "",
        )
        record.params["annotation_id"] = annotation.pk
        record.affected = 1
    return annotation
