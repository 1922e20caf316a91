"""Starts `conveyor serve` on a free port, watches its resources in /proc, reads /metrics."""

import asyncio
import os
import re
import signal
import subprocess
import time

import httpc

_LISTENING = re.compile(r"listening on http://([^\s:]+|\[[^\]]+\]):(\d+)")


class ServerError(Exception):
    """The server could not be started (or stopped) as asked."""


class Server:
    """One `conveyor serve` child process, its log in `log_path`."""

    def __init__(self, binary, repo_root, sets, log_path, host="127.0.0.1"):
        self.binary = os.path.abspath(binary)
        self.repo_root = repo_root
        self.sets = list(sets)
        self.log_path = log_path
        self.host = host
        self.port = None
        self.proc = None
        self.exit_code = None
        self.stop_seconds = None

    def command(self):
        cmd = [self.binary, "serve", "--host", self.host, "--port", "0"]
        for s in self.sets:
            cmd += ["--set", s]
        return cmd

    def start(self, timeout=60.0):
        """Starts the server and waits until the log names its port and /health answers 200."""
        self._log = open(self.log_path, "wb")
        # The default model path is relative to the repository root.
        self.proc = subprocess.Popen(self.command(), cwd=self.repo_root, stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while self.port is None:
            if self.proc.poll() is not None:
                raise ServerError(f"the server exited with {self.proc.returncode} at start; "
                                  f"log: {self.log_path}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise ServerError(f"the server did not listen within {timeout} s; "
                                  f"log: {self.log_path}")
            with open(self.log_path, "r", errors="replace") as f:
                m = _LISTENING.search(f.read())
            if m:
                self.port = int(m.group(2))
            else:
                time.sleep(0.05)
        while True:
            try:
                status, _, _ = asyncio.run(httpc.get(self.host, self.port, "/health", 2.0))
                if status == 200:
                    return
            except (OSError, httpc.HttpError, asyncio.TimeoutError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise ServerError(f"/health never answered 200; log: {self.log_path}")
            time.sleep(0.05)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=20):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def count_log(self, pattern):
        """Lines of the log that match the regular expression `pattern`."""
        rx = re.compile(pattern)
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return sum(1 for line in f if rx.search(line))
        except OSError:
            return 0

    # -- /proc ---------------------------------------------------------------------------------

    def status_kib(self, key):
        """A kB field of /proc/PID/status (VmRSS, VmHWM, ...); None once the process is gone."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def open_fds(self):
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except OSError:
            return None

    def fd_limit(self):
        """The server's soft limit of open files."""
        try:
            with open(f"/proc/{self.proc.pid}/limits") as f:
                for line in f:
                    if line.startswith("Max open files"):
                        return int(line.split()[3])
        except (OSError, ValueError):
            return None
        return None

    def sample(self):
        """{t, rss_kib, hwm_kib, fds} now."""
        return {"t": time.monotonic(), "rss_kib": self.status_kib("VmRSS"),
                "hwm_kib": self.status_kib("VmHWM"), "fds": self.open_fds()}

    # -- stopping ------------------------------------------------------------------------------

    def stop(self, timeout=30.0):
        """SIGTERM, then waits for a clean exit; returns the exit code (killed: -9)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            start = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
            self.stop_seconds = time.monotonic() - start
        self.exit_code = self.proc.returncode
        self._log.close()
        return self.exit_code

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# -- the kernel's TCP counters -------------------------------------------------------------------

# Counters of /proc/net/netstat (TcpExt) that show connections waiting in the kernel: a full
# accept queue (ListenOverflows, ListenDrops) and SYNs sent again (TCPSynRetrans: a connect that
# waited a retransmission timeout, 1 s for the first).
TCP_COUNTERS = ("ListenOverflows", "ListenDrops", "TCPSynRetrans", "TCPTimeouts")


def tcp_counters():
    """{name: value} of TCP_COUNTERS for this network namespace (every process in it, not only
    the server); {} where /proc/net/netstat cannot be read."""
    try:
        with open("/proc/net/netstat") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out = {}
    for names, values in zip(lines[::2], lines[1::2]):
        if not names.startswith("TcpExt:"):
            continue
        for k, v in zip(names.split()[1:], values.split()[1:]):
            if k in TCP_COUNTERS:
                out[k] = int(v)
    return out


# -- /metrics ------------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def parse_metrics(text):
    """Prometheus text to {"name{labels}": value} (labels as written by the server)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


async def metrics(host, port):
    status, body, _ = await httpc.get(host, port, "/metrics", 10.0)
    if status != 200:
        raise httpc.HttpError(f"/metrics answered {status}")
    return parse_metrics(body.decode("utf-8", errors="replace"))


OUTCOMES = ("finished", "cancelled", "expired", "rejected", "failed")


def outcomes(m):
    """conveyor_requests_total by outcome (pipeline/metrics_prometheus.cpp)."""
    return {o: int(m.get(f'conveyor_requests_total{{outcome="{o}"}}', 0)) for o in OUTCOMES}


def delta(after, before):
    return {k: after[k] - before.get(k, 0) for k in after}


def effective_config(binary, repo_root, sets):
    """`conveyor config --print` with the same overrides, as {"section.key": value} (scalars
    only): the limits the server really runs with, e.g. "server.max_connections"."""
    cmd = [os.path.abspath(binary), "config", "--print"]
    for s in sets:
        cmd += ["--set", s]
    try:
        text = subprocess.run(cmd, cwd=repo_root, capture_output=True, text=True, timeout=30,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    out = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]") + "."
            continue
        key, eq, value = line.partition("=")
        if not eq:
            continue
        value = value.strip()
        if value.startswith('"') and value.endswith('"'):
            parsed = value[1:-1]
        elif value in ("true", "false"):
            parsed = value == "true"
        else:
            try:
                parsed = int(value)
            except ValueError:
                try:
                    parsed = float(value)
                except ValueError:
                    parsed = value
        out[section + key.strip()] = parsed
    return out
