"""Administrative actions (``DoAction`` type ``tidelake.<name>``; messages in ``proto/tidelake.proto``):
compaction, snapshot expiry, orphan-file removal, tags, rollback, ALTER TABLE and table info, and
the progress and cancellation of the long ones.

::

    from tidelake.admin import Admin
    admin = Admin("grpc://127.0.0.1:50051", user="alice", password="...")
    admin.compact("shop.orders", full=True)        # {'buckets_compacted': 4, 'files_before': ..., ...}
    admin.table_info("shop.orders")["buckets"]     # files, sorted runs, rows, bytes per bucket
    admin.alter_table("shop.orders", "ADD COLUMN note STRING")

Long operations (``compact``, ``expire_snapshots``, ``remove_orphan_files``) take ``progress=``, a
callable that gets an :class:`OperationProgress` (``operation_id``, ``phase``, ``done``, ``total``,
``files``, ``bytes``) as the server reports it (at most every 100 ms, and once at the end)::

    admin.compact("shop.orders", full=True,
                  progress=lambda p: print(f"{p.phase}: {p.done}/{p.total}"))

Cancelling. The callback returning ``False`` (exactly ``False``; ``None`` goes on) or raising
cancels the operation: the client sends ``tidelake.cancel`` with the operation's id and waits for
the server to end the call, which it does once the operation stopped at a safe point (a compaction
has then removed what it wrote and committed nothing). The call then raises
:class:`~tidelake.errors.CancelledError`, or re-raises the callback's exception. An operation that
finished before the cancel reached it returns its result as usual (``False``) or still re-raises
(an exception), so check the table when that matters. If ``tidelake.cancel`` cannot be sent, the
client ends the call instead, which the server also takes as cancellation; so does a
``KeyboardInterrupt`` that arrives while the client waits for the next report. Then the call
raises at once and the operation stops in the background, at its next safe point. An operation
running elsewhere (with or without ``progress``) is cancelled with :meth:`Admin.cancel` (its id
from :meth:`Admin.list_operations` or from a progress report); its caller then gets
``CancelledError``.

Errors are the classes of :mod:`tidelake.errors` (unknown table: ``NotFoundError``; bad arguments:
``InvalidArgumentError``; a cancelled operation: ``CancelledError``), which are also the
pyarrow.flight exceptions the transport raised. A refused change changes nothing.

An ``Admin`` has one connection; use one per thread (:meth:`Admin.cancel` from another thread
needs an ``Admin`` of its own).
"""
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import pyarrow.flight as flight

from .errors import CancelledError, NotFoundError, map_error
from .protocol import _int_field, _key, _len_field, _read_varint, _signed64, _varint, decode_fields

#: ``google.protobuf.Any`` type URL prefix of tidelake's messages.
TYPE_URL_PREFIX = "type.googleapis.com/tidelake."
#: ``report_progress``: field 10 of the requests of the long actions.
_REPORT_PROGRESS = 10


@dataclass(frozen=True)
class OperationProgress:
    """``tidelake.OperationProgress``: where a long operation stands.

    ``phase`` is what it does now (a compaction: ``planning``, ``compacting buckets``,
    ``committing``; an expiry: ``reading snapshots``, ``reading manifests``, ``deleting files``;
    an orphan removal: ``reading snapshots``, ``reading manifest lists``, ``reading manifests``,
    ``listing files``, ``checking files`` or ``deleting orphan files``; the very first report may
    have an empty phase, before the operation started). ``done`` of ``total`` units of the phase
    (``total`` 0: not known); ``files`` and ``bytes`` written or deleted so far.
    """

    operation_id: str
    phase: str = ""
    done: int = 0
    total: int = 0
    files: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class OperationInfo:
    """``tidelake.OperationInfo``: one running long operation (see :meth:`Admin.list_operations`)."""

    operation_id: str
    action: str            # "tidelake.compact", "tidelake.expire_snapshots", "tidelake.remove_orphan_files"
    table: str             # "db.table"
    user: str
    started_millis: int
    progress: Optional[OperationProgress]
    cancelling: bool       # cancel was asked; it stops at its next safe point


ProgressCallback = Callable[[OperationProgress], Optional[bool]]


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


def _compact_result(body: bytes) -> dict:
    f = decode_fields(body)
    return {"buckets_compacted": _int(f, 1), "files_before": _int(f, 2), "files_after": _int(f, 3),
            "snapshot_id": _int(f, 4)}


def _progress(body: bytes) -> OperationProgress:
    f = decode_fields(body)
    return OperationProgress(operation_id=_str(f, 1), phase=_str(f, 2), done=_int(f, 3), total=_int(f, 4),
                             files=_int(f, 5), bytes=_int(f, 6))


def _operations(body: bytes) -> List[OperationInfo]:
    out = []
    for raw in decode_fields(body).get(1, []):
        o = decode_fields(raw)
        p = o.get(6)
        out.append(OperationInfo(operation_id=_str(o, 1), action=_str(o, 2), table=_str(o, 3), user=_str(o, 4),
                                 started_millis=_int(o, 5), progress=_progress(p[-1]) if p else None,
                                 cancelling=bool(_int(o, 7))))
    return out


def _unpack_any(body: bytes) -> Optional[Tuple[str, bytes]]:
    """``(message name, value)`` of a ``google.protobuf.Any`` holding a tidelake message
    (``type.googleapis.com/tidelake.<name>``); ``None`` when ``body`` is not one (a server that does
    not know ``report_progress`` answers with the plain result message)."""
    try:
        f = decode_fields(body)
    except ValueError:
        return None
    url, value = f.get(1, [None])[-1], f.get(2, [b""])[-1]
    if not isinstance(url, bytes) or not isinstance(value, bytes):
        return None
    try:
        text = url.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.startswith(TYPE_URL_PREFIX):
        return None
    return text[len(TYPE_URL_PREFIX):], value


class Admin:
    """The admin actions of one server, over pyarrow.flight with Basic credentials."""

    def __init__(self, location: str, *, user: str, password: str):
        self._client = flight.FlightClient(location)
        try:
            header = self._client.authenticate_basic_token(user, password)
        except Exception as e:
            self._client.close()
            raise map_error(e) from None
        self._options = flight.FlightCallOptions(headers=[header])

    def close(self):
        self._client.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, name: str, body: bytes) -> bytes:
        try:
            results = list(self._client.do_action(flight.Action(f"tidelake.{name}", body), self._options))
        except Exception as e:
            raise map_error(e) from None
        if len(results) != 1:
            raise RuntimeError(f"tidelake.{name}: expected one result, got {len(results)}")
        return results[0].body.to_pybytes()

    def _long(self, name: str, body: bytes, progress: Optional[ProgressCallback], result_type: str) -> bytes:
        """Runs long action ``name``; with a ``progress`` callable, asks for progress reports, hands
        each to it and cancels the operation when it returns ``False`` or raises (see the module
        doc). Returns the result message."""
        if progress is None:
            return self._call(name, body)
        if not callable(progress):
            raise TypeError(f"progress must be a callable taking an OperationProgress, not {progress!r}")
        action = flight.Action(f"tidelake.{name}", body + _int_field(_REPORT_PROGRESS, True))
        try:
            stream = self._client.do_action(action, self._options)
        except Exception as e:
            raise map_error(e) from None
        operation_id = ""
        result: Optional[bytes] = None
        failure: Optional[BaseException] = None   # the status the call ended with
        stopping = False                          # cancel was asked: no more callbacks
        raised: Optional[BaseException] = None    # what the callback raised
        ended_by_client = False                   # tidelake.cancel could not be sent; the call was ended
        try:
            while True:
                try:
                    r = next(stream)
                except StopIteration:
                    break
                except Exception as e:  # the server's status (KeyboardInterrupt & co. propagate)
                    failure = map_error(e)
                    break
                data = r.body.to_pybytes()
                unpacked = _unpack_any(data)
                if unpacked is None:
                    result = data
                    continue
                kind, value = unpacked
                if kind == "OperationProgress":
                    report = _progress(value)
                    operation_id = report.operation_id or operation_id
                    if stopping:
                        continue
                    try:
                        go_on = progress(report)
                    except BaseException as e:
                        raised, go_on = e, False
                    if go_on is False:
                        stopping = True
                        if not self._request_cancel(operation_id):
                            ended_by_client = True
                            break
                elif kind == result_type:
                    result = value
                else:
                    raise RuntimeError(f"tidelake.{name}: unexpected result {TYPE_URL_PREFIX}{kind}")
        finally:
            # Ends the call if it still runs (an exception above, or the cancel could not be sent):
            # the server cancels an operation whose call ends.
            stream.close()
        if raised is not None:
            raise raised
        if ended_by_client:
            raise CancelledError(f"tidelake.{name} was cancelled by ending the call (tidelake.cancel of "
                                 f"operation {operation_id or '(unknown)'} could not be sent); the server "
                                 "stops it at its next safe point")
        if failure is not None:
            raise failure
        if result is None:
            raise RuntimeError(f"tidelake.{name}: the call ended without a result")
        return result

    def _request_cancel(self, operation_id: str) -> bool:
        """Sends ``tidelake.cancel``; ``False`` when it could not (no id, or the call failed)."""
        if not operation_id:
            return False
        try:
            self._call("cancel", _len_field(1, operation_id))
        except NotFoundError:
            pass  # it has just finished; its call ends with the result
        except Exception:
            return False
        return True

    def compact(self, table: str, *, full: bool = False, partitions: Optional[dict] = None,
                progress: Optional[ProgressCallback] = None) -> dict:
        """Compacts ``table`` (what the picker selects; ``full``: every bucket into one sorted run),
        optionally only the ``partitions`` given as ``{key: value}``. ``progress``: see the module
        doc. Returns ``{'buckets_compacted', 'files_before', 'files_after', 'snapshot_id'}``
        (``snapshot_id`` 0 when nothing needed compaction)."""
        body = _len_field(1, table) + _int_field(2, full)
        for k, v in (partitions or {}).items():
            body += _len_field(3, f"{k}={v}")
        return _compact_result(self._long("compact", body, progress, "CompactResult"))

    def expire_snapshots(self, table: str, *, retain_min: Optional[int] = None, retain_max: Optional[int] = None,
                         older_than: Optional[str] = None, progress: Optional[ProgressCallback] = None) -> dict:
        """Expires snapshots by the table's retention options, or these; returns ``{'snapshots':
        [expired ids], 'files': [deleted paths]}``. ``progress``: see the module doc."""
        body = _len_field(1, table) + _opt_int(2, retain_min) + _opt_int(3, retain_max)
        if older_than is not None:
            body += _len_field(4, older_than)
        return _cleanup(self._long("expire_snapshots", body, progress, "CleanupResult"))

    def expire_changelogs(self, table: str, *, retain_max: Optional[int] = None, retain_min: Optional[int] = None,
                          older_than: Optional[str] = None, max_deletes: Optional[int] = None,
                          delete_all: bool = False, progress: Optional[ProgressCallback] = None) -> dict:
        """Expires long-lived changelogs (tables whose ``changelog.num-retained.*`` /
        ``changelog.time-retained`` outlast their snapshot retention keep expired snapshots'
        changelogs for subscribers). Unset limits keep everything, as Paimon's procedure; counts are
        relative to the latest snapshot. ``delete_all`` removes them all. Returns ``{'snapshots':
        [changelog ids removed], 'files': [deleted paths]}``."""
        body = _len_field(1, table) + _opt_int(2, retain_max) + _opt_int(3, retain_min)
        if older_than is not None:
            body += _len_field(4, older_than)
        body += _opt_int(5, max_deletes) + _int_field(6, delete_all)
        return _cleanup(self._long("expire_changelogs", body, progress, "CleanupResult"))

    def remove_orphan_files(self, table: str, *, older_than: Optional[str] = None, delete: bool = False,
                            progress: Optional[ProgressCallback] = None) -> dict:
        """Lists (``delete``: removes) the files older than ``older_than`` (default ``"1 d"``) that
        no snapshot or tag references; returns ``{'snapshots': [], 'files': [paths]}``.
        ``progress``: see the module doc."""
        body = _len_field(1, table) + (_len_field(2, older_than) if older_than is not None else b"")
        return _cleanup(self._long("remove_orphan_files", body + _int_field(3, delete), progress, "CleanupResult"))

    def list_operations(self) -> List[OperationInfo]:
        """The long operations the server runs now (of every user), oldest first."""
        return _operations(self._call("list_operations", b""))

    def cancel(self, operation_id: str) -> OperationInfo:
        """Cancels a running operation (it stops at its next safe point and its caller gets
        ``CancelledError``); returns its description, ``cancelling`` set. ``NotFoundError`` when no
        operation has that id (any more: it may just have finished)."""
        if not isinstance(operation_id, str):
            raise TypeError(f"operation_id must be a string, not {operation_id!r}")
        operations = _operations(self._call("cancel", _len_field(1, operation_id)))
        if len(operations) != 1:
            raise RuntimeError(f"tidelake.cancel: expected one operation, got {len(operations)}")
        return operations[0]

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
