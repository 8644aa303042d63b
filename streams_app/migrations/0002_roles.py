"""Create the three role groups (docs/api.md#roles-and-the-audit-trail): viewer, operator, admin.

The names are written out here rather than imported from streams_app.accounts.roles: a migration must keep
doing what it did on the day it was written, whatever the code later calls things. Re-running is
harmless (get_or_create); reversing removes the groups, and with them the memberships.
"""

from __future__ import annotations

from django.db import migrations

ROLE_GROUPS = ("viewer", "operator", "admin")


def create_role_groups(apps, schema_editor) -> None:
    Group = apps.get_model("auth", "Group")
    db = schema_editor.connection.alias
    for name in ROLE_GROUPS:
        Group.objects.using(db).get_or_create(name=name)


def delete_role_groups(apps, schema_editor) -> None:
    Group = apps.get_model("auth", "Group")
    Group.objects.using(schema_editor.connection.alias).filter(name__in=ROLE_GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("streams_app", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_role_groups, delete_role_groups)]
