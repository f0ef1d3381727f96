"""Spark's automatic discovery of Python data sources finds ``format("kafkalite")`` here.

Spark (4.0+) imports every top-level module whose name starts with ``pyspark_`` and registers its
``DefaultSource``. Importing this module never fails: without pyspark or pyarrow it offers nothing.
"""

try:
    from kafkalite.spark.source import KafkaliteDataSource as DefaultSource  # noqa: F401
except ImportError:  # the spark extra is not installed
    pass
