#!/usr/bin/env python3
"""Replicates a table's changelog into another table, continuously and exactly once, surviving
kill -9 of either server and of itself.

    python examples/replicate_stream.py --source default.orders --target default.orders_copy
    python examples/replicate_stream.py --source-uri grpc://a:50051 --target-uri grpc://b:50051 \\
        --source shop.orders --target shop.orders --commit-user orders-replica

How: a changelog subscription of the source feeds a streaming write into the target (kind
``changes``). The position of every batch is the source snapshot it belongs to, and the replicator
asks for a commit when a source snapshot is complete. So the target's last durable identifier *is*
the last source snapshot applied: after any crash the replicator opens the writer again, reads
``resume_position()`` and subscribes from the snapshot after it. Nothing is applied twice (the
target refuses positions at or below what is durable) and nothing is skipped (a snapshot is
committed whole, or not at all).

The target must exist with the source's columns. The server addresses default to $TIDELAKE_URI
(default grpc://127.0.0.1:50051), the user to $TIDELAKE_USER (default tidelake) with
$TIDELAKE_PASSWORD. ``--until-snapshot N`` stops once source snapshot N is applied (for tests and
one-off copies); without it the replicator runs until interrupted.
"""
import argparse
import os
import sys
import time

import tidelake


def replicate_once(a, stop_at):
    """Runs until the source's snapshot `stop_at` is applied (or forever); raises on failures."""
    with tidelake.Client(a.target_uri, user=a.user, password=a.password) as target, \
            tidelake.Client(a.source_uri, user=a.user, password=a.password) as source:
        w = target.writer(a.target, commit_user=a.commit_user, kind="changes")
        try:
            durable = w.resume_position()
            if stop_at is not None and durable is not None and durable >= stop_at:
                return durable
            if durable is None:
                sub = source.subscribe(a.source, start="from-snapshot", snapshot_id=1)
            else:
                sub = source.subscribe(a.source, start="from-snapshot", snapshot_id=durable + 1)
            last = durable if durable is not None else 0  # the last source snapshot handled
            with sub:
                for event in sub.events():
                    s = event.progress.snapshot_id
                    if s <= last:
                        continue  # the heartbeat naming where the stream starts, or an applied snapshot
                    if event.batch.num_rows:
                        w.write(event.batch, position=s)
                    if event.progress.complete and not event.progress.heartbeat:
                        # A source snapshot is committed whole (one without rows commits nothing).
                        w.commit(position=s)
                        last = s
                        for ack in w.acks():
                            print(f"applied source snapshots up to {ack.identifier} ({ack.rows} rows)", flush=True)
                        if stop_at is not None and s >= stop_at:
                            w.close()
                            return s
        finally:
            if not w._closed:
                w.abandon()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    uri = os.environ.get("TIDELAKE_URI", "grpc://127.0.0.1:50051")
    ap.add_argument("--source-uri", default=uri)
    ap.add_argument("--target-uri", default=uri)
    ap.add_argument("--user", default=os.environ.get("TIDELAKE_USER", "tidelake"))
    ap.add_argument("--password", default=os.environ.get("TIDELAKE_PASSWORD"))
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--commit-user", default=None, help="default: replicate-<source>")
    ap.add_argument("--until-snapshot", type=int, default=None)
    a = ap.parse_args(argv)
    if a.password is None:
        ap.error("set $TIDELAKE_PASSWORD or pass --password")
    a.commit_user = a.commit_user or f"replicate-{a.source}"
    delay = 0.2
    while True:
        try:
            done = replicate_once(a, a.until_snapshot)
            print(f"replicated up to source snapshot {done}", flush=True)
            return 0
        except KeyboardInterrupt:
            return 130
        except (tidelake.NotFoundError, tidelake.PermissionDeniedError, tidelake.UnauthenticatedError) as e:
            print(f"replication refused: {e}", file=sys.stderr, flush=True)
            return 2
        except Exception as e:  # a server went away, a stream was fenced or cut: resume from durable
            print(f"replication interrupted ({type(e).__name__}: {e}); resuming", file=sys.stderr, flush=True)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


if __name__ == "__main__":
    sys.exit(main())
