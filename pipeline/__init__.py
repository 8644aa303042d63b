"""The analytics pipeline over the bus's history: PySpark jobs, no Django (docs/architecture.md#the-four-parts).

Data flows in three steps, each in its own module so a job can be read, tested and rerun alone:

``extract``
    reads the Parquet *lake* the console's exporter writes (:mod:`streams_app.lake.export`, layout in
    :mod:`pipeline.lake`): stream entries, typed ``eventbus:metrics`` rows, parsed DLQ entries and the
    metric snapshot tables.
``transform`` / ``failures``
    pure DataFrame-to-DataFrame functions: throughput, handler latency percentiles, lag trend,
    anomalies; error signatures and the retries histogram.
``signatures``
    the error-signature rules in plain Python, without Spark: ``failures`` runs them as Spark
    expressions, and the console uses them when it loads the rollups.
``load``
    writes each rollup as Parquet under ``<lake>/rollups/<name>/`` (the console then upserts them into
    its tables).

``main`` wires them for ``spark-submit pipeline/main.py --lake <uri> --out <uri>``, for ``python -m pipeline``
(how the console runs them, in a child process) and for in-process use; ``session`` builds the
SparkSession (local by default, any ``--master`` unchanged) with settings that fit any master;
``compact`` merges the small files successive exports leave in a partition, swapping each partition
directory in one atomic step (the exporter calls it at the end of a run); ``conf`` parses Spark options
given as text; ``standalone`` starts a throwaway standalone cluster from
the installed pyspark (tests, benchmark). No job uses a Python UDF, so executors on a cluster need
nothing but Spark itself.
"""
