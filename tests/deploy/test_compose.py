"""docker-compose.yml as a deployment reads it (Docker cannot run here): what the processes must share.

A background export is written by a job worker and downloaded through the web process
(``BUSCONSOLE_EXPORT_DIR``, streams_app/exports/files.py); in separate containers that directory must be
one named volume mounted in both, made by the image beforehand so that the volume belongs to the
image's user (Docker copies the directory's owner into a new volume; a directory it creates is root's).
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def image_env() -> dict[str, str]:
    """The Dockerfile's ENV pairs (``ENV A=1 \\`` continued lines)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(pair.split("=", 1) for pair in line[4:].split())
    return env


def volume_of(service: dict, path: str) -> tuple[str, str] | None:
    """The named volume (name, mount point) a path lies in, if any."""
    for spec in service.get("volumes", []):
        name, _, mount = spec.partition(":")
        if "/" not in name and (path == mount or path.startswith(mount.rstrip("/") + "/")):
            return name, mount
    return None


def test_web_and_job_workers_share_the_export_directory() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    dockerfile = (ROOT / "Dockerfile").read_text()
    found = set()
    for name in ("web", "worker"):
        service = compose["services"][name]
        env = {**image_env(), **service["environment"]}
        export_dir = env.get("BUSCONSOLE_EXPORT_DIR") or posixpath.join(env["BUSCONSOLE_VAR_DIR"], "exports")
        volume = volume_of(service, export_dir)
        assert volume is not None, f"{name}: {export_dir} is in no named volume: the other container never sees it"
        assert volume[0] in compose["volumes"]
        found.add((export_dir, volume))
    assert len(found) == 1, found  # the same directory in the same volume
    (_, (_, mount)), = found
    assert "mkdir -p" in dockerfile and mount in dockerfile.split("mkdir -p", 1)[1].split("\n", 1)[0], (
        f"the image must create {mount} (owned by its user) so the volume is writable")
