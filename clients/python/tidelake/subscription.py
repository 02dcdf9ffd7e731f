"""A changelog subscription: one long-lived Flight ``DoGet`` stream, resumed after failures.

The server sends the changes of one snapshot after another. Each ``FlightData`` carries a
``ChangelogProgress``; the last message of snapshot ``S`` has ``complete = true``. The client keeps
two numbers: the last *completed* snapshot, and how many rows of the snapshot in progress it has
already handed out. On a transient failure it reconnects and asks for the rest:

::

    connected ──batch of S (S > last)──▶ hand out rows, open = S, rows_of_open += n
        │  ▲                              │ complete: last = S, open = none
        │  └──────────────────────────────┘
        │ Unavailable / Internal / reset / timed out / stalled / unbounded stream ended
        ▼
    backoff ──▶ handshake + DoGet of:
                  nothing completed yet, nothing handed out ──▶ the original ticket
                  nothing completed, open full snapshot S    ──▶ FROM_SNAPSHOT_FULL S, skip rows_of_open
                  nothing completed, open delta snapshot S   ──▶ FROM_SNAPSHOT S, skip rows_of_open
                  last completed L                           ──▶ FROM_SNAPSHOT L+1, skip rows_of_open of open

An ALTER TABLE ends the server's stream at the last snapshot of the old schema (the ticket asks for
``SchemaChangeMode.END_STREAM``: pyarrow's reader cannot take a second schema message). The client
connects again from the next snapshot; later batches have the new schema (``sub.schema``), and
``sub.schema_changes`` counts the changes followed.

Skipping is sound because the server sends the rows of a snapshot in the same order every time for
the same (snapshot, columns, filter). Batches of snapshots at or below the last completed one are
dropped, so a server that resumes earlier (a consumer position, a retried request) causes no
duplicates. Non-transient errors (NotFound, InvalidArgument, OutOfRange, Unauthenticated, ...) are
raised to the caller, as is the last transient error once ``max_retries`` consecutive attempts
failed.
"""
import random
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.flight as flight

from .protocol import FULL_START_MODES, ChangelogProgress, decode_progress, encode_ticket, start_mode_name

ROW_KIND_COLUMN = "_row_kind"

# Substrings of error messages that mean the connection, not the request, failed.
_TRANSIENT_MESSAGES = (
    "connection reset", "connection refused", "connection aborted", "broken pipe", "socket closed",
    "transport is closing", "goaway", "rst_stream", "stream removed", "timed out", "deadline exceeded",
    "unavailable", "failed to connect", "end of tcp stream", "connection closed", "keepalive",
    "h2 protocol error", "unexpected eof", "error reading from server",
)


class ResumeError(RuntimeError):
    """The server's stream contradicts what this client already received (it cannot resume exactly)."""


@dataclass(frozen=True)
class ChangelogEvent:
    """One message of the stream: a (possibly empty) record batch and its progress."""

    batch: pa.RecordBatch
    progress: ChangelogProgress


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection failure worth a reconnect (not a refused request)."""
    if isinstance(exc, (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError)):
        return False
    if isinstance(exc, (flight.FlightUnavailableError, flight.FlightInternalError, flight.FlightTimedOutError,
                        flight.FlightCancelledError, ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, (pa.ArrowKeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)):
        return False  # NotFound, InvalidArgument/OutOfRange, Unimplemented: the request itself is refused
    if isinstance(exc, (flight.FlightError, pa.ArrowException, OSError)):
        text = str(exc).lower()
        return any(m in text for m in _TRANSIENT_MESSAGES)
    return False


class Subscription:
    """An iterator over the changes of a tidelake table, as non-empty ``pyarrow.RecordBatch``es
    (or ``pandas.DataFrame``s with ``output="pandas"``), each with the ``_row_kind`` column first.

    Created by :func:`subscribe`, which opens the stream at once (so a bad table name or start
    position raises there). Iteration blocks until the next change arrives; a bounded subscription
    (``end_snapshot_id`` / ``end_timestamp_millis``) ends after its last snapshot.

    Attributes:
      ``last_snapshot_id``: the last snapshot whose changes were all handed out (``None`` before the
      first; ``0`` when the table had no snapshot yet). Resume a new subscription with
      ``start="from-snapshot", snapshot_id=last_snapshot_id + 1``.
      ``current_snapshot_id``: the snapshot of the last batch handed out.
      ``schema``: the stream's Arrow schema (``_row_kind`` + the table's or projected columns).
      ``reconnects``: how many times the stream was re-opened after a failure.

    Delivery is exactly once per row as long as the server keeps its contract (the same rows in the
    same order when a snapshot is requested again). With ``consumer_id`` the server's recorded
    position takes precedence on every (re)connect; rows of snapshots already completed here are
    dropped, so it can only skip ahead, never repeat.

    Not thread-safe, except :meth:`close`, which may be called from another thread to end a blocked
    iteration.
    """

    def __init__(self, location, table: str, *, user: Optional[str] = None, password: Optional[str] = None,
                 start: str = "default", snapshot_id: Optional[int] = None, timestamp_millis: Optional[int] = None,
                 consumer_id: Optional[str] = None, end_snapshot_id: Optional[int] = None,
                 end_timestamp_millis: Optional[int] = None, columns: Optional[Sequence[str]] = None,
                 filter: Optional[str] = None, heartbeat_millis: Optional[int] = None, output: str = "arrow",
                 reconnect: bool = True, max_retries: int = 10, backoff: Tuple[float, float] = (0.1, 5.0),
                 stall_timeout: Optional[float] = 60.0, headers: Iterable[Tuple[bytes, bytes]] = (),
                 client_options: Optional[dict] = None, connect: bool = True):
        if output not in ("arrow", "pandas"):
            raise ValueError(f"output must be 'arrow' or 'pandas', not {output!r}")
        self.location = location
        self.table = table
        self.start = start_mode_name(start)
        self.snapshot_id = snapshot_id
        self.timestamp_millis = timestamp_millis
        self.consumer_id = consumer_id
        self.end_snapshot_id = end_snapshot_id
        self.end_timestamp_millis = end_timestamp_millis
        self.columns = list(columns) if columns else None
        self.filter = filter
        self.heartbeat_millis = heartbeat_millis
        self.output = output
        self.reconnect = reconnect
        self.max_retries = max_retries
        self.backoff = backoff
        self.stall_timeout = stall_timeout
        self._user, self._password = user, password
        self._headers = [tuple(h) for h in headers]
        self._client_options = dict(client_options or {})

        self.schema: Optional[pa.Schema] = None
        self.last_snapshot_id: Optional[int] = None
        self.current_snapshot_id: Optional[int] = None
        self.reconnects = 0
        self._connected_once = False
        self._open_snapshot: Optional[int] = None  # snapshot with rows handed out but not completed
        self._schema_changed = False  # the stream announced its end at a schema change
        self.schema_changes = 0  # how many ALTER TABLEs this subscription followed
        self._open_rows = 0
        self._skip_snapshot: Optional[int] = None  # rows of this snapshot to drop after a resume
        self._skip_rows = 0
        self._client = None
        self._reader = None
        self._closed = False
        self._finished = False
        self._stalled = False
        self._reading_since: Optional[float] = None
        self._lock = threading.Lock()
        self._watchdog: Optional[threading.Thread] = None
        if connect:
            self._connect_with_retry(None)

    # ------------------------------------------------------------ iteration

    def __iter__(self) -> "Subscription":
        return self

    def __next__(self):
        while True:
            event = self._next_event()
            if event.batch.num_rows:
                return event.batch.to_pandas() if self.output == "pandas" else event.batch

    def events(self) -> Iterator[ChangelogEvent]:
        """Every message, including the empty ones (completed snapshots without changes for this
        subscription, heartbeats), as :class:`ChangelogEvent`; batches stay Arrow whatever ``output``."""
        while True:
            try:
                yield self._next_event()
            except StopIteration:
                return

    def read_all(self) -> pa.Table:
        """All remaining changes as one table (for bounded subscriptions; blocks forever otherwise)."""
        batches = [e.batch for e in self.events() if e.batch.num_rows]
        if batches:
            return pa.Table.from_batches(batches)
        if self.schema is None:
            raise ResumeError("the stream ended before it sent a schema")
        return self.schema.empty_table()

    def close(self) -> None:
        """Ends the subscription (also from another thread: a blocked iteration stops)."""
        with self._lock:
            self._closed = True
            reader, client = self._reader, self._client
            self._reader = self._client = None
        _cancel(reader)
        _close(client)

    @property
    def closed(self) -> bool:
        return self._closed or self._finished

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return (f"Subscription({self.table!r} at {self.location!r}, start={self.start!r}, "
                f"last_snapshot_id={self.last_snapshot_id}, reconnects={self.reconnects})")

    # ------------------------------------------------------------ one message

    def _next_event(self) -> ChangelogEvent:
        """The next message after de-duplication and row skipping; reconnects as needed."""
        while True:
            if self._closed or self._finished:
                raise StopIteration
            reader = self._reader
            if reader is None:
                self._connect_with_retry(None)
                continue
            try:
                self._reading_since = time.monotonic()
                try:
                    chunk = reader.read_chunk()
                finally:
                    self._reading_since = None
            except StopIteration:
                self._drop_connection()
                if self._schema_changed:
                    # The server ended the stream at an ALTER TABLE: the next connection starts
                    # after the last snapshot of the old schema and brings the new schema.
                    self._schema_changed = False
                    self.schema_changes += 1
                    self._connect_with_retry(None)
                    continue
                if self._bounded() or not self.reconnect:
                    self._finished = True
                    raise
                # An unbounded stream has no end: the server went away (shutdown) or dropped us.
                self._connect_with_retry(ConnectionError("the server ended an unbounded changelog stream"))
                continue
            except Exception as e:
                if self._closed:
                    raise StopIteration from None
                stalled, self._stalled = self._stalled, False
                self._drop_connection()
                if not self.reconnect or not (stalled or is_transient(e)):
                    raise
                self._connect_with_retry(e)
                continue
            if chunk.app_metadata is None:
                raise ResumeError("changelog FlightData without app_metadata (ChangelogProgress)")
            progress = decode_progress(chunk.app_metadata)
            if progress.schema_changed:
                self._schema_changed = True
            batch = self._accept(chunk.data, progress)
            if batch is not None:
                return ChangelogEvent(batch, progress)

    def _accept(self, batch: pa.RecordBatch, p: ChangelogProgress) -> Optional[pa.RecordBatch]:
        """Updates the position for one message; returns what to hand out (``None``: a duplicate)."""
        s = p.snapshot_id
        if p.heartbeat:
            # A heartbeat repeats the last completed snapshot; under LATEST it is the first position known.
            if self._open_snapshot is None and (self.last_snapshot_id is None or s > self.last_snapshot_id):
                self.last_snapshot_id = s
            return batch
        if self.last_snapshot_id is not None and s <= self.last_snapshot_id:
            return None  # already handed out in full (the server resumed earlier than asked)
        if self._skip_rows and s < self._skip_snapshot and not batch.num_rows:
            # An empty snapshot ahead of the one being resumed (nothing was handed out of it).
            if p.complete and (self.last_snapshot_id is None or s > self.last_snapshot_id):
                self.last_snapshot_id = s
            return batch
        if self._skip_rows:
            if s != self._skip_snapshot:
                raise ResumeError(f"after a reconnect the server sent snapshot {s} before the "
                                  f"{self._skip_rows} rows of snapshot {self._skip_snapshot} already received")
            drop = min(self._skip_rows, batch.num_rows)
            batch = batch.slice(drop)
            self._skip_rows -= drop
            if self._skip_rows and p.complete:
                raise ResumeError(f"after a reconnect snapshot {s} had fewer rows than already received "
                                  f"({self._skip_rows} missing)")
        if self._open_snapshot != s:
            self._open_snapshot, self._open_rows = s, 0
        self._open_rows += batch.num_rows
        self.current_snapshot_id = s
        if p.complete:
            self.last_snapshot_id = s
            self._open_snapshot, self._open_rows = None, 0
            self._skip_snapshot, self._skip_rows = None, 0
        return batch

    def _bounded(self) -> bool:
        return bool(self.end_snapshot_id) or bool(self.end_timestamp_millis)

    # ------------------------------------------------------------ (re)connecting

    def _resume_request(self) -> dict:
        """The ticket arguments that continue exactly after what was handed out (see the module doc)."""
        base = dict(consumer_id=self.consumer_id, end_snapshot_id=self.end_snapshot_id,
                    end_timestamp_millis=self.end_timestamp_millis, columns=self.columns, filter=self.filter,
                    heartbeat_millis=self.heartbeat_millis)
        self._skip_snapshot, self._skip_rows = self._open_snapshot, self._open_rows
        if self.last_snapshot_id is not None:
            return dict(base, start="from-snapshot", snapshot_id=self.last_snapshot_id + 1)
        if self._open_snapshot is None:
            return dict(base, start=self.start, snapshot_id=self.snapshot_id, timestamp_millis=self.timestamp_millis)
        if self.start in FULL_START_MODES or (self.start == "default" and not self.consumer_id):
            return dict(base, start="from-snapshot-full", snapshot_id=self._open_snapshot)
        if self.start == "default":
            # The consumer's position did not move (nothing completed): the same request, the same rows.
            return dict(base, start="default")
        return dict(base, start="from-snapshot", snapshot_id=self._open_snapshot)

    def _connect_with_retry(self, cause: Optional[BaseException]) -> None:
        attempt = 0 if cause is None else 1
        last = cause
        while True:
            if self._closed:
                raise StopIteration
            if self.end_snapshot_id and self.last_snapshot_id is not None \
                    and self.last_snapshot_id >= self.end_snapshot_id:
                self._finished = True
                raise StopIteration
            if attempt:
                if not self.reconnect or attempt > self.max_retries:
                    raise last
                lo, hi = self.backoff
                time.sleep(min(hi, lo * 2 ** (attempt - 1)) * (0.75 + 0.5 * random.random()))
            try:
                self._connect(encode_ticket(self.table, **self._resume_request()))
                if self._connected_once:
                    self.reconnects += 1
                self._connected_once = True
                return
            except Exception as e:
                if self._closed:
                    raise StopIteration from None
                self._drop_connection()
                if not is_transient(e) or not self.reconnect:
                    raise
                last = e
                attempt += 1

    def _connect(self, ticket: bytes) -> None:
        client = flight.FlightClient(self.location, **self._client_options)
        with self._lock:
            if self._closed:
                _close(client)
                raise StopIteration
            self._client = client
        headers = list(self._headers)
        if self._user is not None:
            headers.append(client.authenticate_basic_token(self._user, self._password or ""))
        reader = client.do_get(flight.Ticket(ticket), flight.FlightCallOptions(headers=headers))
        with self._lock:
            if self._closed:
                _cancel(reader)
                raise StopIteration
            self._reader = reader
        self.schema = reader.schema
        self._start_watchdog()

    def _drop_connection(self) -> None:
        with self._lock:
            reader, client = self._reader, self._client
            self._reader = self._client = None
        _cancel(reader)
        _close(client)

    def _start_watchdog(self) -> None:
        """Cancels a read that blocks longer than ``stall_timeout`` (a silent, half-open connection);
        the read then fails and the subscription reconnects. Heartbeats keep a healthy idle stream
        well under the limit."""
        if not self.stall_timeout or self._watchdog is not None:
            return
        ref = weakref.ref(self)
        period = min(1.0, self.stall_timeout / 4)

        def watch():
            while True:
                time.sleep(period)
                sub = ref()
                if sub is None or sub._closed or sub._finished:
                    return
                since = sub._reading_since
                if since is not None and time.monotonic() - since > sub.stall_timeout:
                    sub._stalled = True
                    _cancel(sub._reader)
                del sub

        self._watchdog = threading.Thread(target=watch, name="tidelake-subscription-watchdog", daemon=True)
        self._watchdog.start()


def _cancel(reader) -> None:
    if reader is not None:
        try:
            reader.cancel()
        except Exception:
            pass


def _close(client) -> None:
    if client is not None:
        try:
            client.close()
        except Exception:
            pass


def subscribe(location, table: str, *, user: Optional[str] = None, password: Optional[str] = None,
              start: str = "default", snapshot_id: Optional[int] = None, timestamp_millis: Optional[int] = None,
              consumer_id: Optional[str] = None, end_snapshot_id: Optional[int] = None,
              end_timestamp_millis: Optional[int] = None, columns: Optional[List[str]] = None,
              filter: Optional[str] = None, heartbeat_millis: Optional[int] = None, output: str = "arrow",
              reconnect: bool = True, max_retries: int = 10, **kwargs) -> Subscription:
    """Subscribes to the changelog of ``table`` on the tidelake server at ``location``.

    Args:
      location: ``"grpc://host:port"`` (or ``grpc+tls://...``; pass TLS settings in
        ``client_options``, which go to ``pyarrow.flight.FlightClient``).
      table: ``"db.table"``.
      user, password: Basic credentials; the Handshake's bearer token is sent with the ``DoGet``
        (and a new one fetched on every reconnect).
      start: where the changes begin (Paimon's scan modes):
        ``"default"`` (the consumer's position when ``consumer_id`` has one, else ``latest-full``),
        ``"latest"`` (changes committed from now on), ``"latest-full"`` (the current rows as ``+I``,
        then changes), ``"from-snapshot"`` / ``"from-snapshot-full"`` (with ``snapshot_id``),
        ``"from-timestamp"`` (with ``timestamp_millis``, epoch milliseconds) and
        ``"compacted-full"``.
      consumer_id: the server records progress in the table's ``consumer/consumer-<id>`` file after
        every completed snapshot (which also keeps expiry from removing unread snapshots); a later
        subscription with the same id resumes there, whatever its ``start``.
      end_snapshot_id, end_timestamp_millis: make the subscription bounded; iteration ends after
        that snapshot (or the last one committed at or before that time).
      columns: projection (``_row_kind`` always comes first).
      filter: a SQL predicate over the table's columns; only matching change rows are sent.
      heartbeat_millis: the idle heartbeat interval (server default 1000, minimum 50).
      output: ``"arrow"`` (``pyarrow.RecordBatch``) or ``"pandas"`` (``pandas.DataFrame``).
      reconnect, max_retries: resume after transient failures, giving up after ``max_retries``
        consecutive failed attempts (exponential backoff, ``backoff=(first, max)`` seconds).
      **kwargs: ``backoff``, ``stall_timeout`` (seconds a read may block before the connection is
        considered dead; ``None`` disables), ``headers``, ``client_options``, ``connect`` (``False``
        defers opening the stream to the first iteration).

    Returns a :class:`Subscription`. Raises at once for errors the server reports when the stream
    opens (unknown table: ``pyarrow.ArrowKeyError``; bad arguments or an expired start snapshot:
    ``pyarrow.ArrowInvalid``; bad credentials: ``pyarrow.flight.FlightUnauthenticatedError``).
    """
    return Subscription(location, table, user=user, password=password, start=start, snapshot_id=snapshot_id,
                        timestamp_millis=timestamp_millis, consumer_id=consumer_id, end_snapshot_id=end_snapshot_id,
                        end_timestamp_millis=end_timestamp_millis, columns=columns, filter=filter,
                        heartbeat_millis=heartbeat_millis, output=output, reconnect=reconnect,
                        max_retries=max_retries, **kwargs)
