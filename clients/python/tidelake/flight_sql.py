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
int64 record_count = 1; }``.

These messages are arrow's (``FlightSql.proto``), not tidelake's: the ones of ``proto/tidelake.proto``
have generated code (:mod:`tidelake.protocol`). This module holds the proto3 wire format by hand
for them: varints (wire type 0) and length-delimited fields (wire type 2), defaults omitted,
unknown fields skipped.
"""
from typing import Dict, Mapping, Optional, Tuple, Union

from .protocol import _as_bytes

SQL_TYPE_URL_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."

_U64 = (1 << 64) - 1


# ---------------------------------------------------------------- wire format


def _varint(n: int) -> bytes:
    n &= _U64  # int64 is sent as its two's complement (10 bytes when negative)
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _len_field(number: int, data: Union[bytes, str]) -> bytes:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return _key(number, 2) + _varint(len(data)) + data


def _int_field(number: int, value: Optional[int]) -> bytes:
    """An int64/enum/bool field; proto3 leaves zero (the default) out."""
    if not value:
        return b""
    return _key(number, 0) + _varint(int(value))


def _read_varint(buf: bytes, i: int):
    n = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def _signed64(n: int) -> int:
    n &= _U64
    return n - (1 << 64) if n >= 1 << 63 else n


def decode_fields(buf: bytes) -> dict:
    """``{field number: [values]}`` of one message: varints as ints, length-delimited as bytes."""
    out, i = {}, 0
    buf = bytes(buf)
    while i < len(buf):
        key, i = _read_varint(buf, i)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            v, i = _read_varint(buf, i)
        elif wire_type == 2:
            n, i = _read_varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated length-delimited field")
            v, i = buf[i:i + n], i + n
        elif wire_type == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire_type == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
        if number == 0:
            raise ValueError("field number 0")
        out.setdefault(number, []).append(v)
    return out


# ---------------------------------------------------------------- messages


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


def encode_statement_query(sql: str) -> bytes:
    """``Any(CommandStatementQuery { string query = 1; })``: a query's GetFlightInfo command."""
    return _any("CommandStatementQuery", _len_field(1, sql))


def encode_get_primary_keys(table: str, *, database: Optional[str] = None) -> bytes:
    """``Any(CommandGetPrimaryKeys { optional catalog = 1; optional db_schema = 2; table = 3 })``."""
    body = (_len_field(2, database) if database else b"") + _len_field(3, table)
    return _any("CommandGetPrimaryKeys", body)


def encode_update_result(record_count: int) -> bytes:
    """``DoPutUpdateResult { int64 record_count = 1; }`` (what a Flight SQL server answers a DoPut with)."""
    return _int_field(1, record_count)


def decode_update_result(data) -> int:
    """``DoPutUpdateResult.record_count`` (-1, "unknown", when the server sent no ``PutResult``;
    empty metadata is the message with its default, 0)."""
    if data is None:
        return -1
    f = decode_fields(_as_bytes(data))
    return _signed64(f[1][-1]) if 1 in f else 0
