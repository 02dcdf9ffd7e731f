"""Python client for tidelake, a Paimon-format lakehouse server speaking Arrow Flight SQL.

Changelog subscriptions (plain Flight ``DoGet`` with a ``tidelake.ChangelogTicket``)::

    import tidelake

    with tidelake.subscribe("grpc://127.0.0.1:50051", "shop.orders", user="alice", password="...",
                            start="latest-full", consumer_id="billing") as sub:
        for batch in sub:                      # pyarrow.RecordBatch, `_row_kind` first
            print(sub.current_snapshot_id, batch.to_pylist())

SQL (Flight SQL through ADBC; needs ``adbc-driver-flightsql``)::

    conn = tidelake.connect("grpc://127.0.0.1:50051", user="alice", password="...")

Administration (Flight actions ``tidelake.*``): ``tidelake.admin.Admin(location, user=, password=)``
with ``compact``, ``expire_snapshots``, ``remove_orphan_files``, ``create_tag``, ``delete_tag``,
``list_tags``, ``rollback``, ``alter_table`` and ``table_info``.
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

__version__ = "0.1.0"

__all__ = [
    "FULL_START_MODES", "START_MODES", "TICKET_TYPE_URL", "ROW_KIND_COLUMN",
    "ChangelogProgress", "ChangelogTicket", "ChangelogEvent", "ResumeError", "Subscription",
    "connect", "decode_progress", "decode_ticket", "encode_ticket", "is_transient", "subscribe",
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
