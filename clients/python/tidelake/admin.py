"""Administrative actions (``DoAction`` type ``tidelake.<name>``; messages in ``proto/tidelake.proto``):
compaction, snapshot expiry, orphan-file removal, tags, rollback, ALTER TABLE and table info.

::

    from tidelake.admin import Admin
    admin = Admin("grpc://127.0.0.1:50051", user="alice", password="...")
    admin.compact("shop.orders", full=True)        # {'buckets_compacted': 4, 'files_before': ..., ...}
    admin.table_info("shop.orders")["buckets"]     # files, sorted runs, rows, bytes per bucket
    admin.alter_table("shop.orders", "ADD COLUMN note STRING")

Errors are pyarrow.flight exceptions carrying the server's message (unknown table: not found; bad
arguments: invalid argument; a refused change changes nothing).
"""
from typing import List, Optional

import pyarrow.flight as flight

from .protocol import _int_field, _key, _len_field, _read_varint, _signed64, _varint, decode_fields


def _str(fields, n, default=""):
    v = fields.get(n)
    return v[-1].decode("utf-8") if v else default


def _int(fields, n):
    v = fields.get(n)
    return _signed64(v[-1]) if v else 0


def _opt_int(number: int, value: Optional[int]) -> bytes:
    """An ``optional int64``: present (even when 0) whenever given."""
    if value is None:
        return b""
    return _key(number, 0) + _varint(int(value))


def _ints(values) -> List[int]:
    """A repeated int64 field: proto3 packs it (one length-delimited run of varints)."""
    out = []
    for v in values:
        if isinstance(v, int):
            out.append(_signed64(v))
            continue
        i = 0
        while i < len(v):
            n, i = _read_varint(v, i)
            out.append(_signed64(n))
    return out


def _cleanup(body: bytes) -> dict:
    f = decode_fields(body)
    return {"snapshots": _ints(f.get(1, [])),
            "files": [v.decode("utf-8") for v in f.get(2, [])]}


def _tags(body: bytes) -> List[dict]:
    out = []
    for raw in decode_fields(body).get(1, []):
        t = decode_fields(raw)
        out.append({"name": _str(t, 1), "snapshot_id": _int(t, 2), "time_millis": _int(t, 3)})
    return out


def _table_info(body: bytes) -> dict:
    f = decode_fields(body)
    buckets = []
    for raw in f.get(5, []):
        b = decode_fields(raw)
        buckets.append({"partition": _str(b, 1), "bucket": _int(b, 2), "files": _int(b, 3),
                        "sorted_runs": _int(b, 4), "rows": _int(b, 5), "bytes": _int(b, 6)})
    return {"table": _str(f, 1), "schema_json": _str(f, 2), "schema_id": _int(f, 3),
            "latest_snapshot_id": _int(f, 4), "buckets": buckets, "total_rows": _int(f, 6),
            "total_bytes": _int(f, 7)}


class Admin:
    """The admin actions of one server, over pyarrow.flight with Basic credentials."""

    def __init__(self, location: str, *, user: str, password: str):
        self._client = flight.FlightClient(location)
        header = self._client.authenticate_basic_token(user, password)
        self._options = flight.FlightCallOptions(headers=[header])

    def close(self):
        self._client.close()

    def _call(self, name: str, body: bytes) -> bytes:
        results = list(self._client.do_action(flight.Action(f"tidelake.{name}", body), self._options))
        if len(results) != 1:
            raise RuntimeError(f"tidelake.{name}: expected one result, got {len(results)}")
        return results[0].body.to_pybytes()

    def compact(self, table: str, *, full: bool = False, partitions: Optional[dict] = None) -> dict:
        body = _len_field(1, table) + _int_field(2, full)
        for k, v in (partitions or {}).items():
            body += _len_field(3, f"{k}={v}")
        f = decode_fields(self._call("compact", body))
        return {"buckets_compacted": _int(f, 1), "files_before": _int(f, 2), "files_after": _int(f, 3),
                "snapshot_id": _int(f, 4)}

    def expire_snapshots(self, table: str, *, retain_min: Optional[int] = None, retain_max: Optional[int] = None,
                         older_than: Optional[str] = None) -> dict:
        body = _len_field(1, table) + _opt_int(2, retain_min) + _opt_int(3, retain_max)
        if older_than is not None:
            body += _len_field(4, older_than)
        return _cleanup(self._call("expire_snapshots", body))

    def remove_orphan_files(self, table: str, *, older_than: Optional[str] = None, delete: bool = False) -> dict:
        body = _len_field(1, table) + (_len_field(2, older_than) if older_than is not None else b"")
        return _cleanup(self._call("remove_orphan_files", body + _int_field(3, delete)))

    def _tag_request(self, table, tag="", snapshot_id=None) -> bytes:
        return _len_field(1, table) + (_len_field(2, tag) if tag else b"") + _opt_int(3, snapshot_id)

    def create_tag(self, table: str, tag: str, snapshot_id: Optional[int] = None) -> List[dict]:
        return _tags(self._call("create_tag", self._tag_request(table, tag, snapshot_id)))

    def delete_tag(self, table: str, tag: str) -> dict:
        return _cleanup(self._call("delete_tag", self._tag_request(table, tag)))

    def list_tags(self, table: str) -> List[dict]:
        return _tags(self._call("list_tags", self._tag_request(table)))

    def rollback(self, table: str, *, snapshot_id: Optional[int] = None, tag: Optional[str] = None) -> dict:
        return _cleanup(self._call("rollback", self._tag_request(table, tag or "", snapshot_id)))

    def alter_table(self, table: str, changes: str) -> dict:
        """``changes`` is the SQL after ``ALTER TABLE <table>``; returns the table's new info."""
        return _table_info(self._call("alter_table", _len_field(1, table) + _len_field(2, changes)))

    def table_info(self, table: str) -> dict:
        return _table_info(self._call("table_info", _len_field(1, table)))
