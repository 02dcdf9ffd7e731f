"""One client object for everything a tidelake server offers: SQL, bulk ingest (append, upsert,
delete, row kinds), changelog subscriptions and the admin actions.

::

    import tidelake

    with tidelake.Client("grpc://127.0.0.1:50051", user="alice", password="...") as tl:
        tl.execute("CREATE TABLE shop.orders (id BIGINT NOT NULL, qty INT, PRIMARY KEY (id))")
        tl.upsert("shop.orders", pandas_frame)                 # +I rows: insert or replace by key
        tl.delete("shop.orders", [1, 2])                       # -D rows
        df = tl.sql("SELECT * FROM shop.orders", output="polars")

Transports. ``Client(...)`` logs in once (Flight ``Handshake`` with Basic credentials) and sends the
bearer token it gets with every call, so all calls share one server session:

- ``sql`` and ``execute`` run through ADBC (``adbc_driver_flightsql``): prepared statements,
  ``$1``-style parameters, Arrow results;
- ``ingest`` and what builds on it send Flight SQL ``CommandStatementIngest`` over ``pyarrow.flight``
  (:mod:`tidelake.flight_sql`), because ADBC cannot pass the options map that carries the primary
  key, partition keys, row-kind column and table options;
- ``subscribe`` and ``admin`` use :mod:`tidelake.subscription` and :mod:`tidelake.admin`, which log
  in by themselves with the same credentials.

An ingest is one commit: the rows of a call become visible together or not at all. A call that
fails leaves the table's rows as they were, including when the data source raises in the middle
of the stream (the client then makes the server drop what it received; see :meth:`Client.ingest`).
Two exceptions remain on the server side: a failed ``create`` leaves the new, empty table behind,
and a failed ``replace`` with different columns has already dropped the old table.

Errors are the classes of :mod:`tidelake.errors`, which are also instances of the pyarrow or ADBC
exception the transport raised. When the server no longer knows the token (it restarted, or the
token idled out) the client logs in again and repeats the call once, unless the call streamed data
that cannot be read a second time.

A client is not thread-safe; give each thread its own.
"""
import os
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.flight as flight

from .errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, UnauthenticatedError, map_error
from .flight_sql import INGEST_MODES, decode_update_result, encode_get_primary_keys, encode_statement_ingest
from .frames import OUTPUTS, from_arrow, to_arrow
from .tidelake_pb2 import TableInfoRequest
from .subscription import ROW_KIND_COLUMN, Subscription, subscribe as _subscribe

DEFAULT_LOCATION = "grpc://127.0.0.1:50051"
ROW_KINDS = ("+I", "-U", "+U", "-D")
# Rows per Flight message when a whole table is sent: large enough to amortise the per-message cost,
# small enough to stay far below gRPC message limits for ordinary rows.
BATCH_ROWS = 64 * 1024

TableName = Union[str, Tuple[str, str]]


def split_table_name(table: TableName) -> Tuple[Optional[str], str]:
    """``"db.table"`` -> ``("db", "table")``; ``"table"`` -> ``(None, "table")`` (the session's
    current database, ``default`` unless changed); a ``(db, table)`` tuple is taken as it is."""
    if isinstance(table, tuple):
        database, name = table
        return database or None, name
    if not isinstance(table, str) or not table:
        raise TypeError(f"table must be 'db.table' or a (db, table) tuple, not {table!r}")
    database, dot, name = table.partition(".")
    return (database, name) if dot else (None, table)


def _names(value: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def _option_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _kind_column_name(names: Iterable[str]) -> str:
    """A row-kind column name the data does not use yet."""
    taken = set(names)
    name = ROW_KIND_COLUMN
    while name in taken:
        name = "_" + name
    return name


def _with_row_kind(data, kind: str) -> Tuple[Union[pa.Table, pa.RecordBatchReader], str]:
    """``data`` (Arrow) plus a string column holding ``kind`` in every row; returns it and the column name."""
    name = _kind_column_name(data.schema.names)
    if isinstance(data, pa.Table):
        return data.append_column(name, pa.array([kind] * data.num_rows, pa.string())), name
    schema = data.schema.append(pa.field(name, pa.string()))

    def batches():
        for b in data:
            yield pa.RecordBatch.from_arrays(list(b.columns) + [pa.array([kind] * b.num_rows, pa.string())],
                                             schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches()), name


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _conform(data, target: pa.Schema, table: TableName):
    """``data`` with each column that the table has, but in another Arrow type, cast to the table's
    type (checked: an overflow or lost precision raises). The server itself only widens types, so a
    pandas ``int64`` column could not fill an ``INT`` column otherwise."""
    wanted = {f.name: f.type for f in target}
    plan = {}
    for f in data.schema:
        t = wanted.get(f.name)
        if t is not None and f.type != t:
            plan[f.name] = t
    if not plan:
        return data
    schema = pa.schema([pa.field(f.name, plan.get(f.name, f.type), f.nullable) for f in data.schema])

    def cast(batch_or_table):
        columns = []
        for f, col in zip(data.schema, batch_or_table.columns):
            if f.name in plan:
                try:
                    col = col.cast(plan[f.name], safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                    raise InvalidArgumentError(f"table {_show(table)}, column '{f.name}': cannot convert {f.type} "
                                               f"to the table's {plan[f.name]}: {e}") from None
            columns.append(col)
        return columns

    if isinstance(data, pa.Table):
        return pa.Table.from_arrays(cast(data), schema=schema)
    return pa.RecordBatchReader.from_batches(
        schema, (pa.RecordBatch.from_arrays(cast(b), schema=schema) for b in data))


class _SourceFailed(Exception):
    """The data being ingested raised; carries that error past the stream handling."""


class Client:
    """A connection to a tidelake server (see the module doc).

    Args:
      location: ``grpc://host:port`` (``grpc+tls://`` for TLS; pass certificates in
        ``client_options`` for pyarrow.flight and in ``adbc_options`` for ADBC).
      user, password: Basic credentials. The constructor logs in at once, so wrong ones raise
        :class:`~tidelake.errors.UnauthenticatedError` here.
      timeout: seconds per call (``None``: no limit).
      client_options: keyword arguments of ``pyarrow.flight.FlightClient``.
      adbc_options: extra ADBC database options (``adbc.flight.sql.*``).
    """

    def __init__(self, location: str = DEFAULT_LOCATION, *, user: Optional[str] = None,
                 password: Optional[str] = None, timeout: Optional[float] = None,
                 client_options: Optional[dict] = None, adbc_options: Optional[dict] = None):
        self.location = location
        self.user = user
        self._password = password
        self.timeout = timeout
        self._client_options = dict(client_options or {})
        self._adbc_options = dict(adbc_options or {})
        self._flight: Optional[flight.FlightClient] = None
        self._header: Optional[Tuple[bytes, bytes]] = None
        self._conn = None
        self._admin = None
        self._closed = False
        try:
            self._login()
        except Exception as e:
            self.close()
            raise map_error(e) from None

    @classmethod
    def from_env(cls, location: Optional[str] = None, *, user: Optional[str] = None,
                 password: Optional[str] = None, **kwargs) -> "Client":
        """A client for ``$TIDELAKE_URI`` (default ``grpc://127.0.0.1:50051``) as ``$TIDELAKE_USER``
        (default ``tidelake``) with ``$TIDELAKE_PASSWORD``; arguments that are given win."""
        return cls(location or os.environ.get("TIDELAKE_URI", DEFAULT_LOCATION),
                   user=user or os.environ.get("TIDELAKE_USER", "tidelake"),
                   password=password if password is not None else os.environ.get("TIDELAKE_PASSWORD"),
                   **kwargs)

    # ------------------------------------------------------------ connection

    def _login(self) -> None:
        """(Re)connects pyarrow.flight and fetches a bearer token; drops the ADBC connection, which
        holds the previous token and is opened again when next needed."""
        self._close_adbc()
        if self._flight is None:
            self._flight = flight.FlightClient(self.location, **self._client_options)
        self._header = None
        if self.user is not None:
            options = flight.FlightCallOptions(timeout=self.timeout)
            try:
                self._header = self._flight.authenticate_basic_token(self.user, self._password or "", options)
            except flight.FlightInternalError:
                # pyarrow words a handshake that cannot connect "Could not finish writing before
                # closing"; a plain call says what happened (no server there: Unavailable).
                try:
                    list(self._flight.list_actions(flight.FlightCallOptions(timeout=self.timeout or 10)))
                except flight.FlightUnavailableError as e:
                    raise e from None
                except Exception:
                    pass
                raise

    def _options(self) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(headers=[self._header] if self._header else [], timeout=self.timeout)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the client is closed")

    @property
    def connection(self):
        """The ADBC DB-API connection (``adbc_driver_flightsql.dbapi``, autocommit) that ``sql`` and
        ``execute`` use; it shares the client's session. For what the client does not wrap, such as
        ``adbc_get_objects`` or ``executemany``."""
        self._check_open()
        if self._conn is None:
            import adbc_driver_flightsql.dbapi as flight_sql

            kwargs = {}
            if self._header is not None:
                kwargs["adbc.flight.sql.authorization_header"] = self._header[1].decode("ascii")
            if self.timeout is not None:
                for op in ("fetch", "query", "update"):
                    kwargs[f"adbc.flight.sql.rpc.timeout_seconds.{op}"] = str(self.timeout)
            kwargs.update(self._adbc_options)
            self._conn = flight_sql.connect(self.location, db_kwargs=kwargs, autocommit=True)
        return self._conn

    def _call(self, fn, *, repeatable: bool = True):
        """Runs ``fn()``; maps its error, and after an UNAUTHENTICATED answer (the server forgot the
        token) logs in again and runs it once more when ``repeatable``."""
        self._check_open()
        try:
            return fn()
        except _SourceFailed as e:
            raise e.__cause__ from None
        except Exception as e:
            mapped = map_error(e)
            if not (repeatable and isinstance(mapped, UnauthenticatedError) and self.user is not None
                    and self._header is not None):
                raise mapped from None
        try:
            self._login()
            return fn()
        except _SourceFailed as e:
            raise e.__cause__ from None
        except Exception as e:
            raise map_error(e) from None

    def _close_adbc(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def close(self) -> None:
        """Closes the connections (also of ``admin``); the client cannot be used afterwards."""
        self._closed = True
        self._close_adbc()
        admin, self._admin = self._admin, None
        client, self._flight = self._flight, None
        for c in (admin, client):
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Client({self.location!r}, user={self.user!r}, {state})"

    # ------------------------------------------------------------ SQL

    def sql(self, query: str, params=None, *, output: str = "arrow"):
        """Runs ``query`` and returns all its rows as a ``pyarrow.Table`` (``output="arrow"``), a
        ``pandas.DataFrame`` (``"pandas"``) or a ``polars.DataFrame`` (``"polars"``).

        ``params`` fills ``$1``, ``$2``, ... (a sequence of values, or a ``pyarrow.RecordBatch`` /
        ``Table`` of one row). Statements that return no rows (DDL, DML) give an empty result; use
        :meth:`execute` for their row count.
        """
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, not {output!r}")

        def run():
            with self.connection.cursor() as cur:
                cur.execute(query, params)
                return cur.fetch_arrow_table()

        return from_arrow(self._call(run), output)

    def execute(self, statement: str, params=None) -> int:
        """Runs a statement that returns no rows (``CREATE``, ``DROP``, ``INSERT``, ``UPDATE``,
        ``DELETE``, ...); returns the number of rows it wrote (0 for DDL, -1 for a query)."""

        def run():
            with self.connection.cursor() as cur:
                cur.execute(statement, params)
                return cur.rowcount

        return self._call(run)

    # ------------------------------------------------------------ writing

    def ingest(self, table: TableName, data, *, mode: str = "append",
               primary_key: Optional[Union[str, Sequence[str]]] = None,
               partition_keys: Optional[Union[str, Sequence[str]]] = None,
               options: Optional[Mapping[str, object]] = None, row_kind_column: Optional[str] = None,
               cast: bool = True) -> int:
        """Writes ``data`` into ``table`` in one commit; returns the number of rows written.

        ``data``: a ``pyarrow.Table``, ``RecordBatch`` or ``RecordBatchReader`` (streamed), a pandas
        or polars ``DataFrame``, a bounded :class:`~tidelake.Subscription`, a dict of columns or a
        list of row dicts. Column names must be the table's; missing nullable columns are NULL.

        ``mode``:

        - ``"append"``: the table must exist (else :class:`~tidelake.errors.NotFoundError`). On a
          primary-key table the rows are ``+I``: a row replaces the one with its key (with the
          default ``deduplicate`` merge engine).
        - ``"create"``: creates the table from the data's schema; it must not exist yet
          (:class:`~tidelake.errors.AlreadyExistsError`).
        - ``"replace"``: replaces all rows (created when missing; recreated when the columns
          differ, which the server does before writing: if the write fails, the old rows are gone).
        - ``"create_append"``: creates the table when missing, else appends.

        When the table is created: ``primary_key`` and ``partition_keys`` (column names, or one
        comma-separated string) and ``options`` (Paimon table options such as ``bucket``,
        ``merge-engine``, ``changelog-producer``) define it. They are ignored for a table that
        exists.

        ``row_kind_column`` names a string column of ``data`` whose values, ``+I``, ``-U``, ``+U`` or
        ``-D``, say what each row does; the column itself is not stored. Retractions (``-U``, ``-D``)
        need a primary-key table. Any other value fails the whole call.

        ``cast``: when appending to a table that exists, the client first asks for the table's
        schema (one more call) and casts columns of another type to the table's, checked (an
        ``int64`` frame column into an ``INT`` column; values that do not fit raise
        :class:`~tidelake.errors.InvalidArgumentError`). ``cast=False`` sends the data as it is; the
        server then accepts only types it can widen losslessly.

        A Table (or frame) is sent again after the client had to log in anew; a stream is not.
        If reading a stream raises, the client makes the server drop what it received (pyarrow
        cannot cancel an upload, and ending it normally would commit it) and re-raises that error.
        """
        database, name = split_table_name(table)
        opts = {str(k): _option_text(v) for k, v in (options or {}).items()}
        if primary_key is not None:
            opts["primary-key"] = ",".join(_names(primary_key))
        if partition_keys is not None:
            opts["partition-keys"] = ",".join(_names(partition_keys))
        if row_kind_column is not None:
            opts["row-kind-column"] = row_kind_column
        if mode not in INGEST_MODES:
            raise ValueError(f"unknown ingest mode {mode!r}; expected one of {', '.join(INGEST_MODES)}")
        command = encode_statement_ingest(name, database=database, mode=mode, options=opts)
        arrow = to_arrow(data)
        if cast and mode in ("append", "create_append"):
            try:
                arrow = _conform(arrow, self.table_schema(table), table)
            except NotFoundError:
                pass  # created from the data (create_append), or refused by the server (append)
        return self._call(lambda: self._put(command, arrow), repeatable=isinstance(arrow, pa.Table))

    def _put(self, command: bytes, data: Union[pa.Table, pa.RecordBatchReader]) -> int:
        """One DoPut of ``data`` under ``command``; returns ``DoPutUpdateResult.record_count``."""
        descriptor = flight.FlightDescriptor.for_command(command)
        writer, results = self._flight.do_put(descriptor, data.schema, self._options())
        batches = iter(data.to_batches(max_chunksize=BATCH_ROWS) if isinstance(data, pa.Table) else data)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except BaseException as e:  # the source failed (or Ctrl-C): nothing may be committed
                self._abort(writer, results)
                raise _SourceFailed() from e
            if not batch.num_rows:
                continue
            try:
                writer.write_batch(batch)
            except Exception as e:
                # Usually the server already refused the call, and close() below raises its status.
                self._abort(writer, results)
                raise e
        try:
            writer.done_writing()
            metadata = results.read()
        except Exception:
            metadata = None  # the call failed; close() raises the server's status
        writer.close()
        return decode_update_result(metadata)

    @staticmethod
    def _abort(writer, results) -> None:
        """Ends an upload so that the server commits nothing, and raises the server's status if it
        refused the call for a reason of its own.

        The Flight ``DoPut`` of pyarrow has no cancel, and closing or dropping the writer ends the
        stream normally. So the client sends a FlightData with metadata only: the server's decoder
        rejects a message without an IPC header, which fails the ingest before its commit.
        """
        try:
            writer.write_metadata(b"tidelake: upload aborted by the client")
            writer.done_writing()
        except Exception:
            pass  # the stream is already broken: the server failed the call
        try:
            metadata = results.read()
        except Exception:
            metadata = None
        try:
            writer.close()
        except Exception as e:
            text = str(e)
            if "Error decoding root message" in text:
                return  # the abort itself, as intended
            raise
        raise RuntimeError(f"the server did not refuse an aborted upload; it reported "
                           f"{decode_update_result(metadata)} rows written")

    def table_schema(self, table: TableName) -> pa.Schema:
        """The Arrow schema of ``table``'s rows (what ``SELECT *`` returns), without reading data."""
        database, name = split_table_name(table)
        query = "SELECT * FROM " + (f"{_quote(database)}." if database else "") + _quote(name)

        def run():
            with self.connection.cursor() as cur:
                return cur.adbc_execute_schema(query)

        return self._call(run)

    def primary_key(self, table: TableName) -> List[str]:
        """The primary-key columns of ``table`` in key order (``[]`` for an append table, and for a
        table that does not exist)."""
        database, name = split_table_name(table)
        descriptor = flight.FlightDescriptor.for_command(encode_get_primary_keys(name, database=database))

        def run():
            opts = self._options()
            info = self._flight.get_flight_info(descriptor, opts)
            parts = [self._flight.do_get(ep.ticket, opts).read_all() for ep in info.endpoints]
            rows = [r for t in parts for r in t.to_pylist()]
            return [r["column_name"] for r in sorted(rows, key=lambda r: r["key_sequence"])]

        return self._call(run)

    def _table_exists(self, table: TableName) -> bool:
        database, name = split_table_name(table)
        qualified = f"{database}.{name}" if database else name

        def run():
            action = flight.Action("tidelake.table_info", TableInfoRequest(table=qualified).SerializeToString())
            list(self._flight.do_action(action, self._options()))
            return True

        try:
            return self._call(run)
        except NotFoundError:
            return False

    def upsert(self, table: TableName, data, *, primary_key: Optional[Union[str, Sequence[str]]] = None,
               partition_keys: Optional[Union[str, Sequence[str]]] = None,
               options: Optional[Mapping[str, object]] = None) -> int:
        """Inserts or updates rows of a primary-key table by key (all rows ``+I``); returns the
        number of rows written.

        With the default merge engine (``deduplicate``) a row replaces the stored row with its key;
        ``partial-update`` overwrites only the non-null columns, ``aggregation`` folds the values,
        ``first-row`` keeps the first row per key.

        A table without a primary key is refused (:class:`~tidelake.errors.InvalidArgumentError`),
        since appending would duplicate rows. A table that does not exist is created when
        ``primary_key`` is given (with ``partition_keys`` and ``options``, as in :meth:`ingest`),
        and is :class:`~tidelake.errors.NotFoundError` otherwise.
        """
        keys = self.primary_key(table)
        if keys:
            if primary_key is not None and _names(primary_key) != keys:
                raise InvalidArgumentError(f"table {_show(table)} has primary key ({', '.join(keys)}), "
                                           f"not ({', '.join(_names(primary_key))})")
            return self.ingest(table, data, mode="append")
        if primary_key is None:
            if self._table_exists(table):
                raise InvalidArgumentError(f"table {_show(table)} has no primary key, so rows cannot be upserted "
                                           "into it; ingest() appends them")
            raise NotFoundError(f"table {_show(table)} does not exist; pass primary_key= to create it")
        try:
            return self.ingest(table, data, mode="create", primary_key=primary_key,
                               partition_keys=partition_keys, options=options)
        except AlreadyExistsError:
            # It exists, and had no primary key a moment ago.
            raise InvalidArgumentError(f"table {_show(table)} has no primary key, so rows cannot be upserted "
                                       "into it; ingest() appends them") from None

    def delete(self, table: TableName, keys) -> int:
        """Deletes the rows with the given keys from a primary-key table (sends them as ``-D``);
        returns the number of delete rows written (keys that match nothing count too).

        ``keys``: anything :meth:`ingest` accepts, holding the primary-key columns (other columns
        may be present; missing ones must be nullable), or, for a one-column key, a list of key
        values (``[1, 2, 3]``), or, for a composite key, a list of tuples in key order. An empty
        list deletes nothing and sends nothing.
        """
        if isinstance(keys, list) and not keys:
            return 0
        if isinstance(keys, list) and not isinstance(keys[0], (dict, pa.RecordBatch)):
            names = self.primary_key(table)
            if not names:
                raise InvalidArgumentError(f"table {_show(table)} has no primary key (or does not exist); "
                                           "rows are deleted by key")
            rows = [k if isinstance(k, (tuple, list)) else (k,) for k in keys]
            if any(len(r) != len(names) for r in rows):
                raise ValueError(f"each key must have {len(names)} value(s): ({', '.join(names)})")
            keys = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
        arrow, kind_column = _with_row_kind(to_arrow(keys), "-D")
        return self.ingest(table, arrow, mode="append", row_kind_column=kind_column)

    def apply_changes(self, table: TableName, data, *, row_kind_column: str = ROW_KIND_COLUMN) -> int:
        """Writes change rows (``+I``/``-U``/``+U``/``-D`` in ``row_kind_column``) into ``table`` in
        one commit; returns the number of change rows written.

        ``data`` is what :meth:`ingest` accepts, e.g. batches of a changelog subscription of another
        table with the same columns (a bounded :class:`~tidelake.Subscription` itself is streamed
        whole), or a changelog read as SQL without its ``_snapshot_id`` column:
        ``sql('SELECT * FROM db."t$changelog" WHERE _snapshot_id > 10').drop_columns(["_snapshot_id"])``.
        """
        return self.ingest(table, data, mode="append", row_kind_column=row_kind_column)

    def writer(self, table: TableName, *, commit_user: str, kind: Optional[str] = None, every_rows: int = 0,
               every_ms: int = 0, row_kind_column: Optional[str] = None,
               schema: Optional[pa.Schema] = None) -> "Writer":
        """A streaming write into ``table`` (:class:`tidelake.writer.Writer`): one DoPut that stays
        open, commits every ``every_rows`` rows and/or every ``every_ms`` milliseconds (and when
        asked, and at the end), and acknowledges each commit once it is durable.

        ``commit_user`` is the producer's stable identity: a restarted producer passes the same one
        and resumes its source after :meth:`Writer.resume_position`. ``kind`` is ``"append"`` (a table
        without primary key; the default there), ``"upsert"`` (the default for primary-key tables)
        or ``"changes"`` (rows carry ``+I``/``-U``/``+U``/``-D`` in ``row_kind_column``, default
        ``_row_kind``). ``schema`` defaults to the table's.
        """
        from .writer import Writer

        self._check_open()
        database, name = split_table_name(table)
        qualified = f"{database}.{name}" if database else name
        if schema is None:
            schema = self.table_schema(table)
        if kind is None:
            kind = "upsert" if self.primary_key(table) else "append"

        def run():
            return Writer(self._flight, self._options(), qualified, schema, commit_user=commit_user, kind=kind,
                          every_rows=every_rows, every_ms=every_ms, row_kind_column=row_kind_column)

        return self._call(run)

    # ------------------------------------------------------------ subscriptions and admin

    def subscribe(self, table: str, **kwargs) -> Subscription:
        """:func:`tidelake.subscribe` on this server with this client's credentials (and
        ``client_options``); see there for ``start``, ``snapshot_id``, ``end_snapshot_id``,
        ``consumer_id``, ``columns``, ``filter``, ``output``, ..."""
        self._check_open()
        kwargs.setdefault("client_options", self._client_options)
        try:
            return _subscribe(self.location, table, user=self.user, password=self._password, **kwargs)
        except Exception as e:
            raise map_error(e) from None

    @property
    def admin(self):
        """A :class:`tidelake.admin.Admin` with the same credentials (created once per client); its
        methods raise the errors of :mod:`tidelake.errors` too."""
        self._check_open()
        if self._admin is None:
            from .admin import Admin

            try:
                admin = Admin(self.location, user=self.user, password=self._password or "")
            except Exception as e:
                raise map_error(e) from None
            for name in dir(Admin):
                if not name.startswith("_") and name != "close" and callable(getattr(Admin, name)):
                    setattr(admin, name, _mapping_errors(getattr(admin, name)))
            self._admin = admin
        return self._admin


def _mapping_errors(method):
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as e:
            raise map_error(e) from None

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    call.__wrapped__ = method
    return call


def _show(table: TableName) -> str:
    database, name = split_table_name(table)
    return f"'{database}.{name}'" if database else f"'{name}'"
