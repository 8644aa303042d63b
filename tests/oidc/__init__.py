"""A real OpenID provider for the single sign-on tests (provider.mjs, driven by provider.py)."""
