"""Python client for tidelake, a Paimon-format lakehouse server speaking Arrow Flight SQL.

Everything through one object, :class:`tidelake.Client` (SQL through ADBC, bulk ingest through
Flight SQL ``CommandStatementIngest``, subscriptions and admin actions through plain Flight)::

    import tidelake

    with tidelake.Client("grpc://127.0.0.1:50051", user="alice", password="...") as tl:
        tl.execute("CREATE TABLE shop.orders (id BIGINT NOT NULL, qty INT, PRIMARY KEY (id))")
        tl.ingest("shop.orders", frame)                       # pyarrow, pandas or polars; one commit
        tl.upsert("shop.orders", changed_rows)                # +I rows: insert or replace by key
        tl.delete("shop.orders", [1, 2])                      # -D rows
        tl.apply_changes("shop.copy", changelog_batch)        # rows with _row_kind +I/-U/+U/-D
        tl.sql("SELECT * FROM shop.orders", output="pandas")  # or "arrow", "polars"
        tl.admin.compact("shop.orders", full=True)            # every tidelake.* action
        sub = tl.subscribe("shop.orders", start="latest-full")

Changelog subscriptions (plain Flight ``DoGet`` with a ``tidelake.ChangelogTicket``)::

    with tidelake.subscribe("grpc://127.0.0.1:50051", "shop.orders", user="alice", password="...",
                            start="latest-full", consumer_id="billing") as sub:
        for batch in sub:                      # pyarrow.RecordBatch, `_row_kind` first
            print(sub.current_snapshot_id, batch.to_pylist())

A plain ADBC DB-API connection (needs ``adbc-driver-flightsql``)::

    conn = tidelake.connect("grpc://127.0.0.1:50051", user="alice", password="...")

Administration (Flight actions ``tidelake.*``): ``tidelake.admin.Admin(location, user=, password=)``
(or ``Client.admin``) with ``compact``, ``expire_snapshots``, ``remove_orphan_files``,
``create_tag``, ``delete_tag``, ``list_tags``, ``rollback``, ``alter_table``, ``table_info``,
``list_operations`` and ``cancel``. The long ones take ``progress=``, a callable that gets each
:class:`OperationProgress` and cancels the operation by returning ``False`` (the call then raises
:class:`CancelledError`)::

    tl.admin.compact("shop.orders", full=True, progress=lambda p: print(p.phase, p.done, p.total))

Errors of ``Client`` are the classes of :mod:`tidelake.errors` (``NotFoundError``,
``AlreadyExistsError``, ``InvalidArgumentError``, ...), which are also the pyarrow or ADBC exception
the transport raised.
"""
from .protocol import (
    FULL_START_MODES,
    START_MODES,
    TICKET_TYPE_URL,
    ChangelogProgress,
    ChangelogTicket,
    decode_progress,
    decode_ticket,
    encode_ticket,
)
from .subscription import ROW_KIND_COLUMN, ChangelogEvent, ResumeError, Subscription, is_transient, subscribe
from .client import ROW_KINDS, Client
from .admin import OperationInfo, OperationProgress
from .writer import Ack, Writer
from .errors import (
    AlreadyExistsError,
    CancelledError,
    ConflictError,
    Error,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TimedOutError,
    UnauthenticatedError,
    UnavailableError,
    UnsupportedError,
)

__version__ = "0.2.0"

__all__ = [
    "FULL_START_MODES", "START_MODES", "TICKET_TYPE_URL", "ROW_KIND_COLUMN",
    "ChangelogProgress", "ChangelogTicket", "ChangelogEvent", "ResumeError", "Subscription",
    "connect", "decode_progress", "decode_ticket", "encode_ticket", "is_transient", "subscribe",
    "Client", "ROW_KINDS", "Error", "NotFoundError", "AlreadyExistsError", "InvalidArgumentError",
    "OutOfRangeError", "ConflictError", "UnauthenticatedError", "PermissionDeniedError", "UnsupportedError",
    "UnavailableError", "InternalError", "CancelledError", "ResourceExhaustedError", "TimedOutError",
    "OperationProgress", "OperationInfo", "Ack", "Writer",
]


def connect(location, *, user=None, password=None, autocommit=True, **db_kwargs):
    """An ADBC DB-API connection to the server's Flight SQL endpoint (``adbc_driver_flightsql``).

    Bounded changelog reads are SQL too: ``SELECT * FROM db."t$changelog" WHERE _snapshot_id > a
    AND _snapshot_id <= b`` (columns ``_row_kind``, ``_snapshot_id``, then the table's).
    """
    import adbc_driver_flightsql.dbapi as flight_sql

    kwargs = dict(db_kwargs)
    if user is not None:
        kwargs["username"] = user
    if password is not None:
        kwargs["password"] = password
    return flight_sql.connect(location, db_kwargs=kwargs, autocommit=autocommit)
