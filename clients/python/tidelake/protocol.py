"""tidelake's own Flight messages (``proto/tidelake.proto``), encoded by hand.

The changelog subscription is a plain Flight ``DoGet`` whose ticket is a ``google.protobuf.Any``
(``type_url = "type.googleapis.com/tidelake.ChangelogTicket"``) wrapping a ``ChangelogTicket``, and
every ``FlightData`` of the stream carries a ``ChangelogProgress`` as ``app_metadata``. The messages
are small and flat, so this module writes and reads the proto3 wire format directly instead of
depending on the ``protobuf`` package: varints (wire type 0) and length-delimited fields (wire type 2),
defaults omitted, unknown fields skipped.
"""
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Union

TICKET_TYPE_URL = "type.googleapis.com/tidelake.ChangelogTicket"

# StartMode: the text a caller writes -> the enum number on the wire. Paimon's `scan.mode` names.
START_MODES = {
    "default": 0,
    "latest": 1,
    "latest-full": 2,
    "from-snapshot": 3,
    "from-snapshot-full": 4,
    "from-timestamp": 5,
    "compacted-full": 6,
}
START_MODE_NAMES = {v: k for k, v in START_MODES.items()}

# SchemaChangeMode: how the server announces an ALTER TABLE on a live stream. pyarrow's
# FlightStreamReader cannot take a second schema message (it blocks on one), so this client asks
# for "end-stream" and resubscribes; "schema-message" is for readers that take it (arrow-rs, Java).
SCHEMA_CHANGE_MODES = {"schema-message": 0, "end-stream": 1}

# Start modes whose first snapshot is sent whole, as +I rows.
FULL_START_MODES = frozenset({"latest-full", "from-snapshot-full", "compacted-full"})

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


def _as_bytes(data) -> bytes:
    if data is None:
        return b""
    if hasattr(data, "to_pybytes"):  # pyarrow.Buffer
        return data.to_pybytes()
    return bytes(data)


# ---------------------------------------------------------------- messages


@dataclass(frozen=True)
class ChangelogProgress:
    """``app_metadata`` of one changelog ``FlightData``.

    ``complete`` means this message ends snapshot ``snapshot_id``: a client that resumes asks for
    ``FROM_SNAPSHOT`` ``snapshot_id + 1``. ``heartbeat`` marks the empty batches sent while idle; they
    repeat the last completed snapshot id.
    """

    snapshot_id: int
    complete: bool = False
    heartbeat: bool = False
    #: The table's schema changed after ``snapshot_id`` (see ``SCHEMA_CHANGE_MODES``).
    schema_changed: bool = False

    def encode(self) -> bytes:
        return (_int_field(1, self.snapshot_id) + _int_field(2, self.complete) + _int_field(3, self.heartbeat)
                + _int_field(4, self.schema_changed))


def decode_progress(data) -> ChangelogProgress:
    """Decodes ``ChangelogProgress`` bytes (``bytes`` or a ``pyarrow.Buffer``; empty = all defaults)."""
    f = decode_fields(_as_bytes(data))
    last = lambda n: f[n][-1] if n in f else 0  # proto3: the last occurrence wins
    return ChangelogProgress(snapshot_id=_signed64(last(1)), complete=bool(last(2)), heartbeat=bool(last(3)),
                             schema_changed=bool(last(4)))


@dataclass(frozen=True)
class ChangelogTicket:
    """The fields of ``tidelake.ChangelogTicket`` (see ``proto/tidelake.proto``)."""

    table: str
    start: str = "default"
    snapshot_id: int = 0
    timestamp_millis: int = 0
    consumer_id: str = ""
    end_snapshot_id: int = 0
    end_timestamp_millis: int = 0
    columns: List[str] = field(default_factory=list)
    filter: str = ""
    heartbeat_millis: int = 0
    schema_change: str = "schema-message"

    def encode(self) -> bytes:
        """The ``ChangelogTicket`` message itself (not wrapped in ``Any``)."""
        start = start_mode_number(self.start)
        out = _len_field(1, self.table) if self.table else b""
        out += _int_field(2, start) + _int_field(3, self.snapshot_id) + _int_field(4, self.timestamp_millis)
        if self.consumer_id:
            out += _len_field(5, self.consumer_id)
        out += _int_field(6, self.end_snapshot_id) + _int_field(7, self.end_timestamp_millis)
        for c in self.columns:
            out += _len_field(8, c)
        if self.filter:
            out += _len_field(9, self.filter)
        out += _int_field(10, self.heartbeat_millis)
        out += _int_field(11, schema_change_mode_number(self.schema_change))
        return out

    def to_ticket_bytes(self) -> bytes:
        """The ``DoGet`` ticket: this message in a ``google.protobuf.Any``."""
        return _len_field(1, TICKET_TYPE_URL) + _len_field(2, self.encode())


def schema_change_mode_number(mode: Union[str, int]) -> int:
    """``"end-stream"`` (or ``"END_STREAM"``, or 1) -> 1; raises ``ValueError`` for unknown modes."""
    if isinstance(mode, int):
        if mode not in SCHEMA_CHANGE_MODES.values():
            raise ValueError(f"unknown schema change mode {mode}")
        return mode
    name = str(mode).strip().lower().replace("_", "-")
    if name not in SCHEMA_CHANGE_MODES:
        raise ValueError(f"unknown schema change mode {mode!r}; expected one of {', '.join(SCHEMA_CHANGE_MODES)}")
    return SCHEMA_CHANGE_MODES[name]


def start_mode_number(start: Union[str, int]) -> int:
    """``"from-snapshot"`` (or ``"FROM_SNAPSHOT"``, or 3) -> 3; raises ``ValueError`` for unknown modes."""
    if isinstance(start, int):
        if start not in START_MODE_NAMES:
            raise ValueError(f"unknown start mode {start}")
        return start
    name = str(start).strip().lower().replace("_", "-")
    if name == "start-default":
        name = "default"
    if name not in START_MODES:
        raise ValueError(f"unknown start mode {start!r}; expected one of {', '.join(START_MODES)}")
    return START_MODES[name]


def start_mode_name(start: Union[str, int]) -> str:
    return START_MODE_NAMES[start_mode_number(start)]


def encode_ticket(table: str, start: Union[str, int] = "default", *, snapshot_id: Optional[int] = None,
                  timestamp_millis: Optional[int] = None, consumer_id: Optional[str] = None,
                  end_snapshot_id: Optional[int] = None, end_timestamp_millis: Optional[int] = None,
                  columns: Optional[Iterable[str]] = None, filter: Optional[str] = None,
                  heartbeat_millis: Optional[int] = None, schema_change: str = "end-stream") -> bytes:
    """The ``DoGet`` ticket bytes of a changelog subscription (``Any``-wrapped ``ChangelogTicket``).

    ``table`` is ``"db.table"`` (or ``"table"`` in the session's current database). ``start`` is a
    Paimon scan mode: ``default``, ``latest``, ``latest-full``, ``from-snapshot`` (with
    ``snapshot_id``), ``from-snapshot-full`` (with ``snapshot_id``), ``from-timestamp`` (with
    ``timestamp_millis``) or ``compacted-full``. No argument is checked beyond its mode name; the
    server answers bad combinations with ``InvalidArgument``. ``schema_change`` is ``end-stream``
    (the default here: pyarrow readers cannot take a second schema message) or ``schema-message``.
    """
    return ChangelogTicket(
        table=table, start=start_mode_name(start), snapshot_id=snapshot_id or 0,
        timestamp_millis=timestamp_millis or 0, consumer_id=consumer_id or "",
        end_snapshot_id=end_snapshot_id or 0, end_timestamp_millis=end_timestamp_millis or 0,
        columns=list(columns or []), filter=filter or "", heartbeat_millis=heartbeat_millis or 0,
        schema_change=schema_change,
    ).to_ticket_bytes()


def decode_ticket(data) -> ChangelogTicket:
    """The inverse of :func:`encode_ticket` (raises ``ValueError`` on another ``Any`` type)."""
    wrapper = decode_fields(_as_bytes(data))
    url = wrapper.get(1, [b""])[-1].decode("utf-8")
    if url != TICKET_TYPE_URL:
        raise ValueError(f"not a ChangelogTicket: type_url {url!r}")
    f = decode_fields(wrapper.get(2, [b""])[-1])
    text = lambda n: f[n][-1].decode("utf-8") if n in f else ""
    num = lambda n: _signed64(f[n][-1]) if n in f else 0
    return ChangelogTicket(
        table=text(1), start=START_MODE_NAMES.get(num(2), str(num(2))), snapshot_id=num(3),
        timestamp_millis=num(4), consumer_id=text(5), end_snapshot_id=num(6), end_timestamp_millis=num(7),
        columns=[c.decode("utf-8") for c in f.get(8, [])], filter=text(9), heartbeat_millis=num(10),
        schema_change={v: k for k, v in SCHEMA_CHANGE_MODES.items()}.get(num(11), str(num(11))),
    )
