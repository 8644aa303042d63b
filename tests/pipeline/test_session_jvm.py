"""The resident driver's JVM flags (:data:`pipeline.session.RESIDENT_JVM`): the optimizing compiler on,
with compile thresholds scaled up so that planning code run a few hundred times per job is not compiled
again run after run (docs/performance.md#figures-behind-the-design), and the short run's flags left as
they are. The flags are given to a real JVM: one that refuses them would not start the driver."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pipeline import session


def _flags(options: str) -> dict[str, str]:
    return dict((flag.split("=", 1) + [""])[:2] for flag in options.split())


def test_the_resident_driver_scales_its_compile_thresholds_and_keeps_c2() -> None:
    resident = _flags(session.RESIDENT_JVM)
    assert "-XX:+UseParallelGC" in resident
    assert float(resident["-XX:CompileThresholdScaling"]) > 1
    assert not any(flag.startswith("-XX:TieredStopAtLevel") for flag in resident)  # C2 stays on
    assert session.SHORT_RUN_JVM == "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"


@pytest.mark.skipif(shutil.which("java") is None, reason="no java")
def test_a_jvm_takes_the_resident_flags() -> None:
    done = subprocess.run(["java", *session.RESIDENT_JVM.split(), "-version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
