"""The fixtures of the console directories whose modules are rerun here: the websocket cookies of the
tail tests, the services' ``bus`` (streams and groups arranged with a raw client)."""

from __future__ import annotations

from tests.valkey.rerun import copy_names

copy_names("tests.console.live.conftest", globals())
copy_names("tests.console.services.conftest", globals())
