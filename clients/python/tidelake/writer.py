"""Streaming writes: one long DoPut that feeds a table's bucket writers, commits by a policy and
acknowledges every commit once it is durable (the protocol is in ``proto/tidelake.proto``,
``StreamingWrite``).

::

    with client.writer("shop.orders", commit_user="orders-cdc", kind="upsert", every_ms=1000) as w:
        start = w.resume_position()          # the last durable position, None when nothing is
        for offset, batch in source.read_after(start):
            w.write(batch, position=offset)  # the position is the source offset after the batch
            for ack in w.acks():             # acknowledgements as they come, never blocking
                source.confirm(ack.identifier)
    # leaving the block commits what is pending and waits for the last ack

Exactly once: a restarted producer opens a writer with the same ``commit_user``, asks
:meth:`Writer.resume_position` and reads its source after it. Rows of a commit that was not
acknowledged were either never committed or are covered by that position.

A writer is not thread-safe; one thread writes, and a background thread of the writer reads the
acknowledgements.
"""
import queue
import threading
from dataclasses import dataclass, field
from typing import List, Optional

import pyarrow as pa
import pyarrow.flight as flight

from .errors import map_error
from .tidelake_pb2 import StreamingWrite, WriteAck, WriteKind, WritePosition

TYPE_URL = "type.googleapis.com/tidelake.StreamingWrite"
KINDS = {"append": WriteKind.APPEND, "upsert": WriteKind.UPSERT, "changes": WriteKind.CHANGES}
DEFAULT_ROW_KIND_COLUMN = "_row_kind"


@dataclass(frozen=True)
class Ack:
    """One durable commit: its identifier (the last position in it), the snapshots it produced
    (APPEND, then COMPACT when compaction ran beside writing) and its row count."""
    identifier: int
    snapshot_ids: List[int] = field(default_factory=list)
    rows: int = 0


def encode_command(table: str, *, commit_user: str, kind: str = "append", every_rows: int = 0,
                   every_ms: int = 0, row_kind_column: Optional[str] = None) -> bytes:
    """The DoPut descriptor command (an ``Any`` holding a ``StreamingWrite``)."""
    from google.protobuf.any_pb2 import Any

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    cmd = StreamingWrite(table=table, kind=KINDS[kind], commit_user=commit_user, every_rows=every_rows,
                         every_ms=every_ms, row_kind_column=row_kind_column or "")
    return Any(type_url=TYPE_URL, value=cmd.SerializeToString()).SerializeToString()


class Writer:
    """A streaming write into one table (see the module doc). Made by ``Client.writer``."""

    def __init__(self, client: flight.FlightClient, options: flight.FlightCallOptions, table: str,
                 schema: pa.Schema, *, commit_user: str, kind: str = "append", every_rows: int = 0,
                 every_ms: int = 0, row_kind_column: Optional[str] = None):
        if not commit_user:
            raise ValueError("commit_user is required: the producer's stable identity")
        self.table = table
        self.commit_user = commit_user
        self.kind = kind
        self.row_kind_column = (row_kind_column or DEFAULT_ROW_KIND_COLUMN) if kind == "changes" else None
        if self.row_kind_column and self.row_kind_column not in schema.names:
            schema = schema.append(pa.field(self.row_kind_column, pa.string(), nullable=False))
        self.schema = schema
        command = encode_command(table, commit_user=commit_user, kind=kind, every_rows=every_rows,
                                 every_ms=every_ms, row_kind_column=self.row_kind_column)
        descriptor = flight.FlightDescriptor.for_command(command)
        try:
            self._writer, self._reader = client.do_put(descriptor, schema, options)
        except Exception as e:
            raise map_error(e) from None
        self._acks: "queue.Queue" = queue.Queue()
        self._error: Optional[BaseException] = None
        self._ended = threading.Event()
        self._closed = False
        self._resume: Optional[int] = None
        self._latest_snapshot = 0
        self.durable: Optional[int] = None
        first = self._read_one()
        if first is None:
            self._raise_ended()
        if not first.resume:
            raise RuntimeError("the server's first answer to a streaming write is not its resume position")
        self._resume = None if first.identifier < 0 else first.identifier
        self._latest_snapshot = first.latest_snapshot_id
        self.durable = self._resume
        self._thread = threading.Thread(target=self._read_acks, name="tidelake-writer-acks", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ acknowledgements

    def _read_one(self) -> Optional[WriteAck]:
        try:
            buf = self._reader.read()
        except Exception as e:
            self._error = map_error(e)
            return None
        if buf is None:
            return None
        ack = WriteAck()
        ack.ParseFromString(buf.to_pybytes())
        return ack

    def _read_acks(self) -> None:
        while True:
            ack = self._read_one()
            if ack is None:
                break
            self._acks.put(Ack(ack.identifier, list(ack.snapshot_ids), ack.rows))
        self._ended.set()
        # Wakes a caller waiting in acks(): the stream's end is an answer too.
        self._acks.put(None)

    def _raise_ended(self) -> None:
        """Raises the error the server ended the stream with (or says it ended)."""
        if self._error is None:
            # The reader saw the end; close() carries the status.
            try:
                self._writer.close()
            except Exception as e:
                self._error = map_error(e)
        if self._error is not None:
            raise self._error
        raise RuntimeError(f"the streaming write into {self.table} ended")

    def resume_position(self) -> Optional[int]:
        """The last identifier durable for this commit user when the writer opened (``None``: nothing
        is). A producer reads its source after it."""
        return self._resume

    @property
    def latest_snapshot_id(self) -> int:
        """The table's newest snapshot when the writer opened (0: none)."""
        return self._latest_snapshot

    def acks(self, timeout: Optional[float] = 0) -> List[Ack]:
        """The acknowledgements received since the last call, oldest first. ``timeout`` > 0 (or
        ``None``: no limit) waits for at least one. Raises the server's error once the stream failed
        and every ack before it was taken."""
        got: List[Optional[Ack]] = []
        try:
            if timeout is None or timeout > 0:
                got.append(self._acks.get(timeout=timeout))
            while True:
                got.append(self._acks.get_nowait())
        except queue.Empty:
            pass
        out: List[Ack] = [a for a in got if a is not None]
        if len(out) < len(got):
            self._acks.put(None)  # the end marker stays for the next caller
        for a in out:
            self.durable = a.identifier
        if not out and self._ended.is_set() and len(got) > 0:
            # Every ack is taken and the server ended the stream: its status is the answer (the
            # reader may have seen only the end; closing the writer half reads the status).
            self._raise_ended()
        return out

    # ------------------------------------------------------------ writing

    def _check(self) -> None:
        if self._closed:
            raise ValueError("the writer is closed")
        if self._ended.is_set() and self._error is not None:
            raise self._error

    def write(self, data, position: Optional[int] = None, commit: bool = False) -> None:
        """Sends ``data`` (a ``RecordBatch``, ``Table`` or ``RecordBatchReader`` with the writer's
        columns; for ``kind="changes"`` also the row-kind column). ``position`` is the source
        position after it (it must grow); ``commit`` asks for a commit after it."""
        self._check()
        if isinstance(data, pa.RecordBatch):
            batches = [data]
        elif isinstance(data, pa.Table):
            batches = data.to_batches(max_chunksize=64 * 1024) or [pa.RecordBatch.from_pylist([], schema=data.schema)]
        else:
            batches = list(data)
        for i, batch in enumerate(batches):
            if batch.schema != self.schema:
                batch = self._conform(batch)
            last = i == len(batches) - 1
            meta = None
            if position is not None or (commit and last):
                meta = WritePosition(commit=commit and last)
                if position is not None:
                    meta.position = position
            try:
                if meta is None:
                    self._writer.write_batch(batch)
                else:
                    self._writer.write_with_metadata(batch, pa.py_buffer(meta.SerializeToString()))
            except Exception as e:
                self._after_failure(e)

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` in the writer's schema: columns by name, cast where the types differ."""
        columns = []
        for f in self.schema:
            if f.name in batch.schema.names:
                col = batch.column(f.name)
                columns.append(col if col.type == f.type else col.cast(f.type, safe=True))
            else:
                columns.append(pa.nulls(batch.num_rows, f.type))
        extra = [n for n in batch.schema.names if n not in self.schema.names]
        if extra:
            raise map_error(pa.ArrowInvalid(f"table {self.table} has no column '{extra[0]}'"))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def commit(self, position: Optional[int] = None) -> None:
        """Asks for a commit now (of what is pending); its ack arrives through :meth:`acks`."""
        self.write(pa.RecordBatch.from_pylist([], schema=self.schema), position=position, commit=True)

    def _after_failure(self, e: BaseException) -> None:
        # The server ended the stream: its status (after every ack it sent) is the error.
        self._ended.wait(timeout=10)
        if self._error is not None:
            raise self._error
        raise map_error(e) from None

    def wait_for(self, identifier: int, timeout: Optional[float] = None) -> List[Ack]:
        """Waits until ``identifier`` (or a later one) is acknowledged; returns the acks seen."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        seen: List[Ack] = []
        while self.durable is None or self.durable < identifier:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"identifier {identifier} was not acknowledged in time")
            got = self.acks(timeout=left if left is not None else 1.0)
            if not got and self._ended.is_set():
                self._raise_ended()
            seen.extend(got)
        return seen

    def close(self) -> List[Ack]:
        """Ends the stream: the server commits what is pending and acknowledges it. Returns the acks
        not taken yet; raises the error the stream ended with."""
        if self._closed:
            return []
        self._closed = True
        try:
            self._writer.done_writing()
        except Exception:
            pass
        self._thread.join()
        try:
            self._writer.close()
        except Exception as e:
            if self._error is None:
                self._error = map_error(e)
        rest = []
        while True:
            try:
                rest.append(self._acks.get_nowait())
            except queue.Empty:
                break
        rest = [a for a in rest if a is not None]
        for a in rest:
            self.durable = a.identifier
        if self._error is not None:
            raise self._error
        return rest

    def abandon(self) -> None:
        """Drops the stream without a last commit (what a crash does): pending rows are discarded.

        pyarrow's DoPut has no cancel, and closing the writer ends the stream normally (which
        commits). So the writer sends a message without an IPC header, which the server refuses,
        ending the stream with what is pending dropped."""
        if self._closed and self._ended.is_set():
            return
        self._closed = True
        try:
            self._writer.write_metadata(b"tidelake: stream abandoned by the client")
            self._writer.done_writing()
        except Exception:
            pass
        self._ended.wait(timeout=10)
        try:
            self._writer.close()
        except Exception:
            pass

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abandon()
