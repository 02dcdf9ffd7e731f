"""tidelake's own Flight messages (``proto/tidelake.proto``) for changelog subscriptions.

The changelog subscription is a plain Flight ``DoGet`` whose ticket is a ``google.protobuf.Any``
(``type_url = "type.googleapis.com/tidelake.ChangelogTicket"``) wrapping a ``ChangelogTicket``, and
every ``FlightData`` of the stream carries a ``ChangelogProgress`` as ``app_metadata``. This module
gives both as small dataclasses with Paimon's mode names, encoded and decoded by the code that
``bash scripts/gen-proto.sh`` generates from the .proto (:mod:`tidelake.tidelake_pb2`, committed);
:func:`parse` is the one place that turns malformed bytes into ``ValueError``.
"""
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Type, TypeVar, Union

from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from . import tidelake_pb2 as pb

#: ``google.protobuf.Any`` type URL prefix of tidelake's messages.
TYPE_URL_PREFIX = "type.googleapis.com/" + pb.DESCRIPTOR.package + "."
TICKET_TYPE_URL = TYPE_URL_PREFIX + pb.ChangelogTicket.DESCRIPTOR.name


def _mode_name(enum_name: str) -> str:
    """``FROM_SNAPSHOT`` -> ``from-snapshot`` (``START_DEFAULT`` -> ``default``)."""
    return "default" if enum_name == "START_DEFAULT" else enum_name.lower().replace("_", "-")


# StartMode: the text a caller writes -> the enum number on the wire. Paimon's `scan.mode` names.
START_MODES = {_mode_name(name): number for name, number in pb.StartMode.items()}
START_MODE_NAMES = {v: k for k, v in START_MODES.items()}

# SchemaChangeMode: how the server announces an ALTER TABLE on a live stream. pyarrow's
# FlightStreamReader cannot take a second schema message (it blocks on one), so this client asks
# for "end-stream" and resubscribes; "schema-message" is for readers that take it (arrow-rs, Java).
SCHEMA_CHANGE_MODES = {_mode_name(name): number for name, number in pb.SchemaChangeMode.items()}

# Start modes whose first snapshot is sent whole, as +I rows.
FULL_START_MODES = frozenset({"latest-full", "from-snapshot-full", "compacted-full"})

M = TypeVar("M", bound=Message)


def _as_bytes(data) -> bytes:
    if data is None:
        return b""
    if hasattr(data, "to_pybytes"):  # pyarrow.Buffer
        return data.to_pybytes()
    return bytes(data)


def parse(message_type: Type[M], data) -> M:
    """``data`` (``bytes``, a ``pyarrow.Buffer`` or ``None``; empty = all defaults) decoded as
    ``message_type``; ``ValueError`` when it is malformed."""
    message = message_type()
    try:
        message.ParseFromString(_as_bytes(data))
    except DecodeError as e:
        raise ValueError(f"malformed {message_type.DESCRIPTOR.full_name}: {e}") from None
    return message


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
        return pb.ChangelogProgress(snapshot_id=self.snapshot_id, complete=self.complete, heartbeat=self.heartbeat,
                                    schema_changed=self.schema_changed).SerializeToString()


def decode_progress(data) -> ChangelogProgress:
    """Decodes ``ChangelogProgress`` bytes (``bytes`` or a ``pyarrow.Buffer``; empty = all defaults)."""
    m = parse(pb.ChangelogProgress, data)
    return ChangelogProgress(snapshot_id=m.snapshot_id, complete=m.complete, heartbeat=m.heartbeat,
                             schema_changed=m.schema_changed)


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
        return pb.ChangelogTicket(
            table=self.table, start=start_mode_number(self.start), snapshot_id=self.snapshot_id,
            timestamp_millis=self.timestamp_millis, consumer_id=self.consumer_id,
            end_snapshot_id=self.end_snapshot_id, end_timestamp_millis=self.end_timestamp_millis,
            columns=list(self.columns), filter=self.filter, heartbeat_millis=self.heartbeat_millis,
            schema_change=schema_change_mode_number(self.schema_change),
        ).SerializeToString()

    def to_ticket_bytes(self) -> bytes:
        """The ``DoGet`` ticket: this message in a ``google.protobuf.Any``."""
        return any_pb2.Any(type_url=TICKET_TYPE_URL, value=self.encode()).SerializeToString()


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
    wrapper = parse(any_pb2.Any, data)
    if wrapper.type_url != TICKET_TYPE_URL:
        raise ValueError(f"not a ChangelogTicket: type_url {wrapper.type_url!r}")
    t = parse(pb.ChangelogTicket, wrapper.value)
    return ChangelogTicket(
        table=t.table, start=START_MODE_NAMES.get(t.start, str(t.start)), snapshot_id=t.snapshot_id,
        timestamp_millis=t.timestamp_millis, consumer_id=t.consumer_id, end_snapshot_id=t.end_snapshot_id,
        end_timestamp_millis=t.end_timestamp_millis, columns=list(t.columns), filter=t.filter,
        heartbeat_millis=t.heartbeat_millis,
        schema_change={v: k for k, v in SCHEMA_CHANGE_MODES.items()}.get(t.schema_change, str(t.schema_change)),
    )
