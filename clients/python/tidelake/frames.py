"""Data frames in and out: what :class:`tidelake.Client` accepts as rows to write, and the shapes it
returns query results in.

Everything travels as Arrow. pandas and polars are imported only when such an object is passed or
asked for, so neither is a dependency of the package.
"""
import sys
from typing import Union

import pyarrow as pa

OUTPUTS = ("arrow", "pandas", "polars")

ArrowData = Union[pa.Table, pa.RecordBatchReader]


def _is_instance(data, module: str, cls: str) -> bool:
    mod = sys.modules.get(module)  # not imported: data cannot be one of its objects
    return mod is not None and isinstance(data, getattr(mod, cls, ()))


def to_arrow(data) -> ArrowData:
    """``data`` as a ``pyarrow.Table`` (a whole frame, which can be sent again) or a
    ``pyarrow.RecordBatchReader`` (a stream, read once).

    Accepted: ``pyarrow.Table``, ``RecordBatch``, ``RecordBatchReader``, a list of ``RecordBatch``,
    ``pandas.DataFrame`` (its index is dropped), ``polars.DataFrame`` / ``LazyFrame``, a bounded
    :class:`tidelake.Subscription` (streamed), any object with ``__arrow_c_stream__``, a
    ``dict`` of columns and a ``list`` of row dicts.
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data
    if _is_instance(data, "pandas", "DataFrame"):
        table = pa.Table.from_pandas(data, preserve_index=False)
        return table.replace_schema_metadata(None)
    if _is_instance(data, "polars", "LazyFrame"):
        data = data.collect()
    if _is_instance(data, "polars", "DataFrame"):
        return data.to_arrow()
    from .subscription import Subscription

    if isinstance(data, Subscription):
        if data.output != "arrow":
            raise ValueError("a subscription to write from must have output='arrow'")
        if data.schema is None:
            raise ValueError("the subscription is not open yet (it has no schema)")
        return pa.RecordBatchReader.from_batches(data.schema, data)
    if isinstance(data, dict):
        return pa.table(data)
    if isinstance(data, (list, tuple)):
        if data and all(isinstance(b, pa.RecordBatch) for b in data):
            return pa.Table.from_batches(list(data))
        if all(isinstance(r, dict) for r in data):
            return pa.Table.from_pylist(list(data))
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    raise TypeError(f"cannot write {type(data).__name__}: pass a pyarrow Table/RecordBatch/RecordBatchReader, "
                    "a pandas or polars DataFrame, a dict of columns or a list of row dicts")


def from_arrow(table: pa.Table, output: str):
    """``table`` as ``output``: ``"arrow"`` (itself), ``"pandas"`` or ``"polars"``."""
    if output == "arrow":
        return table
    if output == "pandas":
        return table.to_pandas()
    if output == "polars":
        import polars

        return polars.from_arrow(table)
    raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, not {output!r}")
