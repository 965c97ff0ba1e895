"""A TCP proxy on loopback that makes a link slow, for benches/ssh_latency.sh.

The kernel here has no netem qdisc, so the latency is made in user space:
every chunk read from one side is written to the other DELAY_MS later, in
the order it came, in each direction (a round trip of twice DELAY_MS).
With a rate (kbit/s) the link also has a bottleneck: a chunk is cut into
1448-byte segments that leave one after another at that rate, then take
the delay, so a burst larger than the link carries in time waits in a queue,
as it would in a router's buffer. The proxy reads as fast as it can, so the
sender never sees that queue; the wait is measured instead.

Every 100 ms it writes its counters as JSON to --stats (atomically): bytes
carried each way, and per direction the longest queueing wait since start
or since the last SIGUSR1 (which starts a new window) and the queue now.

Run: python3 benches/delay_proxy.py --upstream 127.0.0.1:PORT
       --port-file F --stats F [--delay-ms 100] [--rate-kbit 0]
(the listening port, chosen by the kernel on 127.0.0.1, is written to
--port-file). Loopback only: both addresses must be 127.0.0.1.
"""

import argparse
import collections
import json
import os
import signal
import socket
import threading
import time

SEGMENT = 1448  # a TCP segment's payload at an Ethernet MTU


class Direction:
    """One way of one connection: a reader that stamps and queues, and a
    writer that sends each segment when it is due."""

    def __init__(self, name, src, dst, delay, rate_bps, stats):
        self.name, self.src, self.dst = name, src, dst
        self.delay, self.rate_bps, self.stats = delay, rate_bps, stats
        self.queue = collections.deque()
        self.cond = threading.Condition()
        self.eof = False
        self.link_free = 0.0  # when the bottleneck has sent what is queued

    def start(self):
        threading.Thread(target=self.read, daemon=True).start()
        threading.Thread(target=self.write, daemon=True).start()

    def read(self):
        while True:
            try:
                data = self.src.recv(65536)
            except OSError:
                data = b""
            now = time.monotonic()
            with self.cond:
                if not data:
                    self.eof = True
                    self.cond.notify()
                    return
                if self.rate_bps:
                    for i in range(0, len(data), SEGMENT):
                        seg = data[i : i + SEGMENT]
                        begin = max(now, self.link_free)
                        self.link_free = begin + len(seg) * 8 / self.rate_bps
                        self.stats.queued(self.name, begin - now)
                        self.queue.append((self.link_free + self.delay, seg))
                else:
                    self.queue.append((now + self.delay, data))
                self.cond.notify()

    def write(self):
        while True:
            with self.cond:
                while not self.queue and not self.eof:
                    self.cond.wait()
                if not self.queue:
                    break
                due, data = self.queue.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                self.dst.sendall(data)
            except OSError:
                break
            self.stats.carried(self.name, len(data))
        try:
            self.dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def backlog(self):
        """Seconds the bottleneck still needs for what is queued."""
        return max(0.0, self.link_free - time.monotonic()) if self.rate_bps else 0.0


class Stats:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.bytes = {"c2s": 0, "s2c": 0}
        self.window_max = {"c2s": 0.0, "s2c": 0.0}
        self.total_max = {"c2s": 0.0, "s2c": 0.0}
        self.directions = []
        self.connections = 0

    def carried(self, name, n):
        with self.lock:
            self.bytes[name] += n

    def queued(self, name, wait):
        with self.lock:
            self.window_max[name] = max(self.window_max[name], wait)
            self.total_max[name] = max(self.total_max[name], wait)

    def new_window(self, *_):
        with self.lock:
            self.window_max = {"c2s": 0.0, "s2c": 0.0}

    def dump(self):
        with self.lock:
            backlog = {"c2s": 0.0, "s2c": 0.0}
            for d in self.directions:
                backlog[d.name] = max(backlog[d.name], d.backlog())
            doc = {
                "connections": self.connections,
                "bytes": dict(self.bytes),
                "queue_max_ms": {k: v * 1000 for k, v in self.window_max.items()},
                "queue_max_ms_since_start": {k: v * 1000 for k, v in self.total_max.items()},
                "queue_now_ms": {k: v * 1000 for k, v in backlog.items()},
            }
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True, help="127.0.0.1:PORT")
    p.add_argument("--port-file", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--delay-ms", type=float, default=100.0, help="each way")
    p.add_argument("--rate-kbit", type=float, default=0.0, help="0: no cap")
    a = p.parse_args()
    host, port = a.upstream.rsplit(":", 1)
    if host != "127.0.0.1":
        raise SystemExit("delay_proxy.py: loopback only")
    delay, rate_bps = a.delay_ms / 1000.0, a.rate_kbit * 1000.0
    stats = Stats(a.stats)
    signal.signal(signal.SIGUSR1, stats.new_window)

    def dumper():
        while True:
            stats.dump()
            time.sleep(0.1)

    threading.Thread(target=dumper, daemon=True).start()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(lsock.getsockname()[1]))
    os.replace(a.port_file + ".tmp", a.port_file)
    while True:
        client, _ = lsock.accept()
        server = socket.create_connection((host, int(port)))
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up = Direction("c2s", client, server, delay, rate_bps, stats)
        down = Direction("s2c", server, client, delay, rate_bps, stats)
        with stats.lock:
            stats.connections += 1
            stats.directions += [up, down]
        up.start()
        down.start()


if __name__ == "__main__":
    main()
