"""Administrative actions (``DoAction`` type ``tidelake.<name>``; messages in ``proto/tidelake.proto``,
encoded by its generated code, :mod:`tidelake.tidelake_pb2`): compaction, snapshot expiry,
orphan-file removal, tags, rollback, ALTER TABLE and table info, and the progress and cancellation
of the long ones.

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
from google.protobuf import any_pb2
from google.protobuf.message import Message

from . import tidelake_pb2 as pb
from .errors import CancelledError, NotFoundError, map_error
from .protocol import TYPE_URL_PREFIX, parse


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


# The request messages are those of tidelake_pb2 (generated from proto/tidelake.proto); results are
# handed out as the dicts and dataclasses below, field for field.


def _cleanup(body: bytes) -> dict:
    m = parse(pb.CleanupResult, body)
    return {"snapshots": list(m.snapshots), "files": list(m.files)}


def _tags(body: bytes) -> List[dict]:
    return [{"name": t.name, "snapshot_id": t.snapshot_id, "time_millis": t.time_millis}
            for t in parse(pb.TagList, body).tags]


def _branches(body: bytes) -> List[dict]:
    return [{"name": b.name, "create_time_millis": b.create_time_millis}
            for b in parse(pb.BranchList, body).branches]


def _table_info(body: bytes) -> dict:
    m = parse(pb.TableInfo, body)
    buckets = [{"partition": b.partition, "bucket": b.bucket, "files": b.files, "sorted_runs": b.sorted_runs,
                "rows": b.rows, "bytes": b.bytes} for b in m.buckets]
    return {"table": m.table, "schema_json": m.schema_json, "schema_id": m.schema_id,
            "latest_snapshot_id": m.latest_snapshot_id, "buckets": buckets, "total_rows": m.total_rows,
            "total_bytes": m.total_bytes}


def _compact_result(body: bytes) -> dict:
    m = parse(pb.CompactResult, body)
    return {"buckets_compacted": m.buckets_compacted, "files_before": m.files_before,
            "files_after": m.files_after, "snapshot_id": m.snapshot_id}


def _progress_of(m: "pb.OperationProgress") -> OperationProgress:
    return OperationProgress(operation_id=m.operation_id, phase=m.phase, done=m.done, total=m.total,
                             files=m.files, bytes=m.bytes)


def _progress(body: bytes) -> OperationProgress:
    return _progress_of(parse(pb.OperationProgress, body))


def _operations(body: bytes) -> List[OperationInfo]:
    return [OperationInfo(operation_id=o.operation_id, action=o.action, table=o.table, user=o.user,
                          started_millis=o.started_millis,
                          progress=_progress_of(o.progress) if o.HasField("progress") else None,
                          cancelling=o.cancelling)
            for o in parse(pb.OperationList, body).operations]


def _unpack_any(body: bytes) -> Optional[Tuple[str, bytes]]:
    """``(message name, value)`` of a ``google.protobuf.Any`` holding a tidelake message
    (``type.googleapis.com/tidelake.<name>``); ``None`` when ``body`` is not one (a server that does
    not know ``report_progress`` answers with the plain result message)."""
    try:
        wrapper = parse(any_pb2.Any, body)
    except ValueError:
        return None
    if not wrapper.type_url.startswith(TYPE_URL_PREFIX):
        return None
    return wrapper.type_url[len(TYPE_URL_PREFIX):], wrapper.value


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

    def _long(self, name: str, request: Message, progress: Optional[ProgressCallback], result_type: str) -> bytes:
        """Runs long action ``name`` with ``request`` (a message with ``report_progress``); with a
        ``progress`` callable, asks for progress reports, hands each to it and cancels the operation
        when it returns ``False`` or raises (see the module doc). Returns the result message."""
        if progress is None:
            return self._call(name, request.SerializeToString())
        if not callable(progress):
            raise TypeError(f"progress must be a callable taking an OperationProgress, not {progress!r}")
        request.report_progress = True
        action = flight.Action(f"tidelake.{name}", request.SerializeToString())
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
            self._call("cancel", pb.OperationRequest(operation_id=operation_id).SerializeToString())
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
        request = pb.CompactRequest(table=table, full=bool(full),
                                    partitions=[f"{k}={v}" for k, v in (partitions or {}).items()])
        return _compact_result(self._long("compact", request, progress, "CompactResult"))

    def expire_snapshots(self, table: str, *, retain_min: Optional[int] = None, retain_max: Optional[int] = None,
                         older_than: Optional[str] = None, progress: Optional[ProgressCallback] = None) -> dict:
        """Expires snapshots by the table's retention options, or these; returns ``{'snapshots':
        [expired ids], 'files': [deleted paths]}``. ``progress``: see the module doc."""
        request = pb.ExpireSnapshotsRequest(table=table, retain_min=retain_min, retain_max=retain_max,
                                            older_than=older_than)
        return _cleanup(self._long("expire_snapshots", request, progress, "CleanupResult"))

    def expire_changelogs(self, table: str, *, retain_max: Optional[int] = None, retain_min: Optional[int] = None,
                          older_than: Optional[str] = None, max_deletes: Optional[int] = None,
                          delete_all: bool = False, progress: Optional[ProgressCallback] = None) -> dict:
        """Expires long-lived changelogs (tables whose ``changelog.num-retained.*`` /
        ``changelog.time-retained`` outlast their snapshot retention keep expired snapshots'
        changelogs for subscribers). Unset limits keep everything, as Paimon's procedure; counts are
        relative to the latest snapshot. ``delete_all`` removes them all. Returns ``{'snapshots':
        [changelog ids removed], 'files': [deleted paths]}``."""
        request = pb.ExpireChangelogsRequest(table=table, retain_max=retain_max, retain_min=retain_min,
                                             older_than=older_than, max_deletes=max_deletes,
                                             delete_all=bool(delete_all))
        return _cleanup(self._long("expire_changelogs", request, progress, "CleanupResult"))

    def remove_orphan_files(self, table: str, *, older_than: Optional[str] = None, delete: bool = False,
                            progress: Optional[ProgressCallback] = None) -> dict:
        """Lists (``delete``: removes) the files older than ``older_than`` (default ``"1 d"``) that
        no snapshot or tag references; returns ``{'snapshots': [], 'files': [paths]}``.
        ``progress``: see the module doc."""
        request = pb.RemoveOrphanFilesRequest(table=table, older_than=older_than, delete=bool(delete))
        return _cleanup(self._long("remove_orphan_files", request, progress, "CleanupResult"))

    def list_operations(self) -> List[OperationInfo]:
        """The long operations the server runs now (of every user), oldest first."""
        return _operations(self._call("list_operations", pb.OperationRequest().SerializeToString()))

    def cancel(self, operation_id: str) -> OperationInfo:
        """Cancels a running operation (it stops at its next safe point and its caller gets
        ``CancelledError``); returns its description, ``cancelling`` set. ``NotFoundError`` when no
        operation has that id (any more: it may just have finished)."""
        if not isinstance(operation_id, str):
            raise TypeError(f"operation_id must be a string, not {operation_id!r}")
        request = pb.OperationRequest(operation_id=operation_id)
        operations = _operations(self._call("cancel", request.SerializeToString()))
        if len(operations) != 1:
            raise RuntimeError(f"tidelake.cancel: expected one operation, got {len(operations)}")
        return operations[0]

    def _tag_request(self, table, tag="", snapshot_id=None) -> bytes:
        return pb.TagRequest(table=table, tag=tag, snapshot_id=snapshot_id).SerializeToString()

    def create_tag(self, table: str, tag: str, snapshot_id: Optional[int] = None) -> List[dict]:
        return _tags(self._call("create_tag", self._tag_request(table, tag, snapshot_id)))

    def delete_tag(self, table: str, tag: str) -> dict:
        return _cleanup(self._call("delete_tag", self._tag_request(table, tag)))

    def list_tags(self, table: str) -> List[dict]:
        return _tags(self._call("list_tags", self._tag_request(table)))

    def rollback(self, table: str, *, snapshot_id: Optional[int] = None, tag: Optional[str] = None) -> dict:
        return _cleanup(self._call("rollback", self._tag_request(table, tag or "", snapshot_id)))

    def _branch_request(self, table, branch="", from_tag=None) -> bytes:
        return pb.BranchRequest(table=table, branch=branch, from_tag=from_tag).SerializeToString()

    def create_branch(self, table: str, branch: str, from_tag: Optional[str] = None) -> List[dict]:
        """An empty branch, or one starting at ``from_tag``'s snapshot; returns the table's
        branches. The branch is read and written as table ``<table>$branch_<branch>``."""
        return _branches(self._call("create_branch", self._branch_request(table, branch, from_tag)))

    def delete_branch(self, table: str, branch: str) -> List[dict]:
        """Deletes one branch (or several, comma-separated); returns the remaining ones."""
        return _branches(self._call("delete_branch", self._branch_request(table, branch)))

    def fast_forward(self, table: str, branch: str) -> List[dict]:
        """Makes the table's main branch what ``branch`` is."""
        return _branches(self._call("fast_forward", self._branch_request(table, branch)))

    def list_branches(self, table: str) -> List[dict]:
        return _branches(self._call("list_branches", self._branch_request(table)))

    def alter_table(self, table: str, changes: str) -> dict:
        """``changes`` is the SQL after ``ALTER TABLE <table>``; returns the table's new info."""
        request = pb.AlterTableRequest(table=table, changes=changes)
        return _table_info(self._call("alter_table", request.SerializeToString()))

    def table_info(self, table: str) -> dict:
        return _table_info(self._call("table_info", pb.TableInfoRequest(table=table).SerializeToString()))
