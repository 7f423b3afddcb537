"""python-osc's side of VeilInteropTests: an OSC implementation Veil did not write.

  osc_peer.py parse   stdin: one hex datagram per line; stdout: JSON, per datagram the list of
                      its messages (bundles flattened in order) as {"address", "args": [{"type", "value"}]}
  osc_peer.py build   stdin: JSON {"blend": {name: value}, "head": [x, y, z, w], "time": t};
                      stdout: JSON {"datagrams": [hex], "messages": [...]}: a general bundle (nested,
                      every type) and a VMC frame built with python-osc's builders
  osc_peer.py serve   a VMC Marionette built on python-osc's UDP server and dispatcher, on
                      127.0.0.1 (port argv[2], default 0: any free one); stdout: JSON lines, first
                      {"listening": port}, then one per /VMC/Ext/Blend/Apply: {"frame": n, "datagrams":
                      received so far, "time": last /VMC/Ext/T, "blend": {name: value} since the last
                      apply, "bones": {name: [px, py, pz, qx, qy, qz, qw]} since the last apply,
                      "ok": last /VMC/Ext/OK}; ends when stdin closes (or after argv[3] seconds,
                      default 300)
  osc_peer.py send    a VMC Performer built on python-osc's UDPClient: sends to host argv[2], port
                      argv[3], one frame every argv[4] seconds (default 1/30); stdin: JSON list of
                      frames {"blend": {name: value}, "head": [x, y, z, w], "eyes": [x, y, z, w]
                      (optional, both eye bones), "time": t}, each sent as one bundle: /VMC/Ext/OK,
                      /VMC/Ext/T, the root, the bones, the blendshapes, /VMC/Ext/Blend/Apply;
                      stdout: JSON {"sent": frames, "bytes": [datagram sizes]}
"""
import json
import sys
import threading
import time

from pythonosc.osc_bundle_builder import IMMEDIATELY, OscBundleBuilder
from pythonosc.osc_message_builder import OscMessageBuilder
from pythonosc.osc_packet import OscPacket


def describe(message):
    args = []
    for value in message.params:
        if isinstance(value, bool) or not isinstance(value, (int, float, str, bytes)):
            raise SystemExit("unexpected argument %r in %s" % (value, message.address))
        if isinstance(value, int):
            args.append({"type": "i", "value": value})
        elif isinstance(value, float):
            args.append({"type": "f", "value": value})
        elif isinstance(value, str):
            args.append({"type": "s", "value": value})
        else:
            args.append({"type": "b", "value": list(value)})
    return {"address": message.address, "args": args}


def parse():
    datagrams = []
    for line in sys.stdin:
        line = line.strip()
        if line:
            packet = OscPacket(bytes.fromhex(line))
            datagrams.append([describe(timed.message) for timed in packet.messages])
    json.dump(datagrams, sys.stdout)


def message(address, *args):
    builder = OscMessageBuilder(address=address)
    for arg_type, value in args:
        builder.add_arg(value, arg_type)
    return builder.build()


def bundle(*contents):
    builder = OscBundleBuilder(IMMEDIATELY)
    for content in contents:
        builder.add_content(content)
    return builder.build()


def build():
    request = json.load(sys.stdin)
    general = bundle(
        message("/veil/test", ("i", -123456), ("f", 0.1), ("s", "h\u00e9llo"), ("b", b"\x00\x01\x02\x03\x04")),
        bundle(message("/nested/empty"), bundle(message("/deeper", ("s", ""), ("i", 2147483647)))),
        message("/after", ("f", -2.5)),
    )
    blends = [message("/VMC/Ext/Blend/Val", ("s", name), ("f", value)) for name, value in request["blend"].items()]
    head = message("/VMC/Ext/Bone/Pos", ("s", "Head"), ("f", 0.0), ("f", 0.05), ("f", 0.0),
                   *[("f", v) for v in request["head"]])
    # Apply in the outer bundle before the nested bone and blendshapes: order must not matter.
    vmc = bundle(message("/VMC/Ext/OK", ("i", 1)), message("/VMC/Ext/T", ("f", request["time"])),
                 message("/VMC/Ext/Blend/Apply"), bundle(head, *blends))
    datagrams = [general.dgram, vmc.dgram]
    json.dump({"datagrams": [d.hex() for d in datagrams],
               "messages": [[describe(t.message) for t in OscPacket(d).messages] for d in datagrams]}, sys.stdout)


def vmc_frame(frame):
    contents = [message("/VMC/Ext/OK", ("i", 1)), message("/VMC/Ext/T", ("f", frame["time"])),
                message("/VMC/Ext/Root/Pos", ("s", "root"), *[("f", v) for v in [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])]
    contents.append(message("/VMC/Ext/Bone/Pos", ("s", "Head"), ("f", 0.0), ("f", 0.0), ("f", 0.0),
                            *[("f", v) for v in frame["head"]]))
    for eye in ("LeftEye", "RightEye") if "eyes" in frame else ():
        contents.append(message("/VMC/Ext/Bone/Pos", ("s", eye), ("f", 0.0), ("f", 0.0), ("f", 0.0),
                                *[("f", v) for v in frame["eyes"]]))
    contents += [message("/VMC/Ext/Blend/Val", ("s", name), ("f", value)) for name, value in frame["blend"].items()]
    contents.append(message("/VMC/Ext/Blend/Apply"))
    return bundle(*contents)


def send():
    from pythonosc.udp_client import UDPClient

    host, port = sys.argv[2], int(sys.argv[3])
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 1 / 30
    frames = json.load(sys.stdin)
    client = UDPClient(host, port)
    sizes = []
    start = time.monotonic()
    for n, frame in enumerate(frames):
        due = start + n * interval
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        packet = vmc_frame(frame)
        client.send(packet)
        sizes.append(len(packet.dgram))
    json.dump({"sent": len(frames), "bytes": sizes}, sys.stdout)


def serve():
    from pythonosc.dispatcher import Dispatcher
    from pythonosc.osc_server import BlockingOSCUDPServer

    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 300.0
    state = {"frame": 0, "datagrams": 0, "time": None, "ok": None, "blend": {}, "bones": {}}

    def on_blend(address, name, value):
        state["blend"][name] = value

    def on_bone(address, name, *values):
        state["bones"][name] = list(values)

    def on_time(address, value):
        state["time"] = value

    def on_ok(address, *values):
        state["ok"] = values[0] if values else None

    def on_apply(address, *args):
        line = {"frame": state["frame"], "datagrams": state["datagrams"], "time": state["time"], "ok": state["ok"],
                "blend": state["blend"], "bones": state["bones"]}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        state["frame"] += 1
        state["blend"], state["bones"] = {}, {}

    dispatcher = Dispatcher()
    dispatcher.map("/VMC/Ext/Blend/Val", on_blend)
    dispatcher.map("/VMC/Ext/Bone/Pos", on_bone)
    dispatcher.map("/VMC/Ext/Root/Pos", on_bone)
    dispatcher.map("/VMC/Ext/T", on_time)
    dispatcher.map("/VMC/Ext/OK", on_ok)
    dispatcher.map("/VMC/Ext/Blend/Apply", on_apply)
    server = BlockingOSCUDPServer(("127.0.0.1", port), dispatcher)
    # Room for seconds of frames (up to the system's limit), so that a busy machine that does not
    # schedule this process for a while does not make UDP drop what a test then counts.
    import socket
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    # Counted before python-osc dispatches the datagram's messages (an apply then sees its own).
    handle = server.finish_request

    def counted(request, client_address):
        state["datagrams"] += 1
        handle(request, client_address)

    server.finish_request = counted
    server.timeout = 0.1
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    sys.stdout.write(json.dumps({"listening": server.server_address[1]}) + "\n")
    sys.stdout.flush()
    deadline = time.monotonic() + limit
    while not closed.is_set() and time.monotonic() < deadline:
        server.handle_request()
    # What arrived before stdin closed and is still queued.
    server.timeout = 0.2
    while True:
        before = state["datagrams"]
        server.handle_request()
        if state["datagrams"] == before:
            break


if __name__ == "__main__":
    {"parse": parse, "build": build, "serve": serve, "send": send}[sys.argv[1] if len(sys.argv) > 1 else ""]()
