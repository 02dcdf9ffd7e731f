"""What the latency benches share: starting `tidelake serve` on a config and percentiles."""
import pathlib
import re
import subprocess


def password_hash(binary, password="pw"):
    return subprocess.run([binary, "hash-password"], input=password + "\n", capture_output=True, text=True,
                          check=True).stdout.strip()


def start(binary, tmp, config_text):
    """`tidelake serve` on tmp/wh with `config_text` (written to tmp/tidelake.toml); (process, URI)."""
    cfg = pathlib.Path(tmp) / "tidelake.toml"
    cfg.write_text(config_text)
    proc = subprocess.Popen([binary, "serve", "--warehouse", str(pathlib.Path(tmp) / "wh"),
                             "--listen", "127.0.0.1:0", "--config", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    m = re.match(r"tidelake listening on 127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, f"grpc://127.0.0.1:{m.group(1)}"


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pct(xs, p):
    """The `p` quantile of seconds `xs`, in milliseconds."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000 if xs else float("nan")
