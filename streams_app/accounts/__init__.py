"""Accounts: roles and read-only mode (:mod:`.roles`), personal API tokens (:mod:`.tokens`) and
login throttling (:mod:`.login`)."""
