"""python-osc's side of VeilInteropTests: an OSC implementation Veil did not write.

  osc_peer.py parse   stdin: one hex datagram per line; stdout: JSON, per datagram the list of
                      its messages (bundles flattened in order) as {"address", "args": [{"type", "value"}]}
  osc_peer.py build   stdin: JSON {"blend": {name: value}, "head": [x, y, z, w], "time": t};
                      stdout: JSON {"datagrams": [hex], "messages": [...]}: a general bundle (nested,
                      every type) and a VMC frame built with python-osc's builders
"""
import json
import sys

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


if __name__ == "__main__":
    {"parse": parse, "build": build}[sys.argv[1] if len(sys.argv) > 1 else ""]()
