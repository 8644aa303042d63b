"""The only code that talks to the monitored Redis servers (docs/architecture.md#the-one-door-to-redis).

Views import the verb modules (``reads``, ``actions``) and get frozen dataclasses back;
every failure is an :class:`~streams_app.redis_ops.errors.OpsError`.
"""
