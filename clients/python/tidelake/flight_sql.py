"""The few Flight SQL messages the client sends over plain ``pyarrow.flight``, encoded by hand.

ADBC covers queries and statements, but its ``adbc_ingest`` cannot carry the options map of
``CommandStatementIngest`` (field 1000), where tidelake reads the primary key, the partition keys,
the row-kind column and Paimon table options. So bulk ingest is a ``DoPut`` whose descriptor is a
CMD descriptor holding a ``google.protobuf.Any`` of ``arrow.flight.protocol.sql.CommandStatementIngest``
(``format/FlightSql.proto``)::

    message CommandStatementIngest {
      message TableDefinitionOptions {
        TableNotExistOption if_not_exist = 1;   // UNSPECIFIED 0, CREATE 1, FAIL 2
        TableExistsOption if_exists = 2;        // UNSPECIFIED 0, FAIL 1, APPEND 2, REPLACE 3
      }
      TableDefinitionOptions table_definition_options = 1;
      string table = 2;
      optional string schema = 3;               // the database
      optional string catalog = 4;
      bool temporary = 5;
      optional bytes transaction_id = 6;
      map<string, string> options = 1000;
    }

The server answers with one ``PutResult`` whose ``app_metadata`` is ``DoPutUpdateResult {
int64 record_count = 1; }``. The wire helpers are those of :mod:`tidelake.protocol`.
"""
from typing import Dict, Mapping, Optional, Tuple

from .protocol import _as_bytes, _int_field, _len_field, _signed64, decode_fields

SQL_TYPE_URL_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."

# Ingest mode -> (if_not_exist, if_exists), as ADBC maps its own modes.
_CREATE, _FAIL_MISSING = 1, 2
_FAIL_EXISTING, _APPEND, _REPLACE = 1, 2, 3
INGEST_MODES: Dict[str, Tuple[int, int]] = {
    "append": (_FAIL_MISSING, _APPEND),            # the table must exist
    "create": (_CREATE, _FAIL_EXISTING),           # the table must not exist
    "replace": (_CREATE, _REPLACE),                # overwrite the rows (created when missing)
    "create_append": (_CREATE, _APPEND),           # create when missing, else append
}


def _any(message: str, body: bytes) -> bytes:
    return _len_field(1, SQL_TYPE_URL_PREFIX + message) + _len_field(2, body)


def encode_statement_ingest(table: str, *, database: Optional[str] = None, mode: str = "append",
                            options: Optional[Mapping[str, str]] = None) -> bytes:
    """The descriptor command of a bulk ingest: ``Any(CommandStatementIngest)`` bytes.

    ``mode`` is one of :data:`INGEST_MODES`; ``options`` is the string map of field 1000 (written in
    key order, so equal arguments give equal bytes).
    """
    if mode not in INGEST_MODES:
        raise ValueError(f"unknown ingest mode {mode!r}; expected one of {', '.join(INGEST_MODES)}")
    if_not_exist, if_exists = INGEST_MODES[mode]
    body = _len_field(1, _int_field(1, if_not_exist) + _int_field(2, if_exists)) + _len_field(2, table)
    if database:
        body += _len_field(3, database)
    for key in sorted(options or {}):
        body += _len_field(1000, _len_field(1, key) + _len_field(2, str(options[key])))
    return _any("CommandStatementIngest", body)


def decode_statement_ingest(data) -> dict:
    """The inverse of :func:`encode_statement_ingest` (for tests and debugging)."""
    wrapper = decode_fields(_as_bytes(data))
    url = wrapper.get(1, [b""])[-1].decode("utf-8")
    if url != SQL_TYPE_URL_PREFIX + "CommandStatementIngest":
        raise ValueError(f"not a CommandStatementIngest: type_url {url!r}")
    f = decode_fields(wrapper.get(2, [b""])[-1])
    tdo = decode_fields(f.get(1, [b""])[-1])
    modes = {v: k for k, v in INGEST_MODES.items()}
    pair = (tdo.get(1, [0])[-1], tdo.get(2, [0])[-1])
    options = {}
    for entry in f.get(1000, []):
        e = decode_fields(entry)
        options[e.get(1, [b""])[-1].decode("utf-8")] = e.get(2, [b""])[-1].decode("utf-8")
    return {"table": f.get(2, [b""])[-1].decode("utf-8"),
            "database": f[3][-1].decode("utf-8") if 3 in f else None,
            "mode": modes.get(pair, str(pair)), "options": options}


def encode_get_primary_keys(table: str, *, database: Optional[str] = None) -> bytes:
    """``Any(CommandGetPrimaryKeys { optional catalog = 1; optional db_schema = 2; table = 3 })``."""
    body = (_len_field(2, database) if database else b"") + _len_field(3, table)
    return _any("CommandGetPrimaryKeys", body)


def decode_update_result(data) -> int:
    """``DoPutUpdateResult.record_count`` (-1, "unknown", when the server sent no ``PutResult``;
    empty metadata is the message with its default, 0)."""
    if data is None:
        return -1
    f = decode_fields(_as_bytes(data))
    return _signed64(f[1][-1]) if 1 in f else 0
