"""``{% id_with_time %}``: IDs on the audit log carry their UTC time, computed here from the ID's ms part."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streams_app.audit.models import AuditEvent


def utc_text(entry_id: str) -> tuple[str, str]:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=int(entry_id.split("-")[0]))
    return moment.isoformat(timespec="milliseconds"), moment.strftime(
        "%Y-%m-%d %H:%M:%S."
    ) + f"{moment.microsecond // 1000:03d} UTC"


def test_audit_target_ids_show_their_time(viewer_client) -> None:
    ids = ["1795458509000-0", "1795458509123-7", "0-1", "1795458600000-0"]
    AuditEvent.objects.create(
        username="otto",
        action="dlq.requeue",
        connection="default",
        target_display="orders:dlq",
        target_ids=ids,
        outcome="ok",
        affected=4,
    )
    body = viewer_client.get("/audit/").content.decode()
    cell = body.split('<span class="audit-ids">')[1].split("</td>")[0]
    for entry_id in ids[:2]:
        iso, human = utc_text(entry_id)
        assert f'<code class="stream-id">{entry_id}</code> <time class="small muted" datetime="{iso}"' in cell
        assert human in cell
    assert (
        '<code class="stream-id">0-1</code>' in cell and cell.count("<time") == 2
    )  # ms 0 has no time to show
    assert ids[3] not in cell and "+1" in cell  # three shown, the rest counted
