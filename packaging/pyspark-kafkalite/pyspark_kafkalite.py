"""Spark 4 looks for Python data sources in installed top-level modules named ``pyspark_*`` and
registers the ``DefaultSource`` of each under its ``name()``: this module makes that
``format("kafkalite")``, with no ``kafkalite.spark.register(spark)`` call.

Everything lives in :mod:`kafkalite.spark`; this module only names it.
"""

from kafkalite.spark.source import KafkaliteDataSource as DefaultSource

__all__ = ["DefaultSource"]
