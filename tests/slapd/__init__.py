"""A real LDAP directory for the LDAP login tests (Debian's slapd, driven by server.py)."""
