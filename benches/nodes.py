#!/usr/bin/env python3
"""N loopback HTTP servers answering every GET with one file's bytes: a fleet
of nodes for the fleet benchmarks, in one process. Prints the addresses,
comma-separated (each quoted with --quoted, for a Prometheus target list),
then serves until killed.

    nodes.py FILE N CONTENT_TYPE [--quoted]
"""

import http.server
import socketserver
import sys
import threading

body = open(sys.argv[1], "rb").read()
count, content_type = int(sys.argv[2]), sys.argv[3]
quoted = "--quoted" in sys.argv[4:]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


addresses = []
for _ in range(count):
    server = Server(("127.0.0.1", 0), Handler)
    addresses.append("127.0.0.1:%d" % server.server_address[1])
    threading.Thread(target=server.serve_forever, daemon=True).start()
print(",".join(("'%s'" % a) if quoted else a for a in addresses), flush=True)
threading.Event().wait()
