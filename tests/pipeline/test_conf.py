"""Spark options as text (``--conf``, ``BUSCONSOLE_SPARK_CONF``) and the shuffle sizing rule, without Spark."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline import conf
from pipeline.session import MAX_PER_CORE, MIN_ROUNDS, PARTITION_INPUT_BYTES, shuffle_partitions
from tests.servers import REPO

MB = 2**20


def test_items_are_key_value_pairs_and_a_later_key_wins() -> None:
    assert conf.parse_items(["spark.a=1", " spark.b = x=y ", "spark.a=2", "spark.c="]) == {
        "spark.a": "2", "spark.b": "x=y", "spark.c": "",
    }


@pytest.mark.parametrize(("item", "message"), [
    ("spark.executor.memory", "is not key=value"),
    ("=4g", "is not key=value"),
    ("executor.memory=4g", "'executor.memory' is not a Spark option"),
    ("sparkk.executor.memory=4g", "is not a Spark option"),
    ("spark.=1", "is not a Spark option"),
])
def test_a_malformed_item_is_refused_with_its_text(item: str, message: str) -> None:
    with pytest.raises(conf.ConfError, match=message) as caught:
        conf.parse_items([item], source="--conf")
    assert str(caught.value).startswith("--conf: ")


def test_a_list_splits_on_commas_and_lines_and_keeps_list_values_whole() -> None:
    raw = "spark.jars.packages=g:a:1,g:b:2, spark.cores.max=8\nspark.jars=a.jar,b.jar,,\n"
    assert conf.parse_list(raw) == {
        "spark.jars.packages": "g:a:1,g:b:2", "spark.cores.max": "8", "spark.jars": "a.jar,b.jar",
    }
    assert conf.parse_list("") == {} and conf.parse_list(" , \n") == {}
    with pytest.raises(conf.ConfError, match="^BUSCONSOLE_SPARK_CONF: 'nothing' is not key=value"):
        conf.parse_list("nothing,spark.a=1")


def test_a_malformed_setting_stops_django_at_start_up() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings", "BUSCONSOLE_SPARK_CONF": "executor.memory=4g"}
    started = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert "ImproperlyConfigured: BUSCONSOLE_SPARK_CONF: 'executor.memory' is not a Spark option" in started.stderr


def test_shuffle_partitions_grow_with_the_lake_in_rounds_of_the_cores() -> None:
    assert (PARTITION_INPUT_BYTES, MIN_ROUNDS, MAX_PER_CORE) == (64 * MB, 4, 16)
    assert shuffle_partitions(2, 0) == 2 * 4  # an empty or tiny lake: the least rounds per core
    assert shuffle_partitions(2, 4 * 128 * MB) == 2 * 4  # 256 MB per core: still four rounds
    assert shuffle_partitions(2, 4 * 128 * MB + 1) == 2 * 5
    assert shuffle_partitions(16, 10 * 2**30) == 16 * 10  # 10 GiB over 16 cores: 640 MB each, 10 rounds
    assert shuffle_partitions(4, 10**15) == 4 * 16  # capped: adaptive execution splits no further
    assert shuffle_partitions(0, 10) == 4
