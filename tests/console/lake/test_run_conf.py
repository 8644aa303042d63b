"""``manage.py run_pipeline --conf``: Spark options are checked before anything runs and go with a job."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from streams_app.jobs.models import Job
from streams_app.lake.models import PipelineRun

pytestmark = pytest.mark.django_db


def test_a_malformed_option_stops_the_command_before_any_run() -> None:
    with pytest.raises(CommandError, match="--conf: 'executor.memory' is not a Spark option"):
        call_command("run_pipeline", "--conf", "executor.memory=4g")
    with pytest.raises(CommandError, match="--conf: 'spark.executor.memory' is not key=value"):
        call_command("run_pipeline", "--job", "--conf", "spark.executor.memory")
    assert not PipelineRun.objects.exists() and not Job.objects.exists()


def test_options_go_with_a_queued_job(capsys) -> None:
    call_command("run_pipeline", "--job", "--conf", "spark.executor.memory=4g", "--conf", "spark.cores.max=8")
    job = Job.objects.get()
    assert job.kind == "pipeline"
    assert job.parameters["spark_conf"] == {"spark.executor.memory": "4g", "spark.cores.max": "8"}
    assert f"Queued pipeline job {job.pk}" in capsys.readouterr().out
