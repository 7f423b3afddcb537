import Foundation
import VeilCore
import VeilInterop
import XCTest
import VeilTestSupport

/// Veil's OSC against python-osc, an implementation it did not write (python/osc_peer.py, in the
/// virtual environment python/setup installs and `make test` runs): what Veil sends, python-osc
/// parses to the same messages; what python-osc builds, Veil decodes to the same messages.
final class PythonOSCTests: XCTestCase {
    func testPythonOSCParsesWhatVeilSends() throws {
        let update = ExpressionUpdate(TestExpressions.random(seed: 42), time: 7.25)
        let encoder = VMCEncoder()
        var datagrams = encoder.datagrams(for: update)
        let general = OSCBundle(elements: [
            .message(OSCMessage("/types", [.int32(-7), .int32(.max), .float32(-0.1), .string("héllo"), .string(""), .blob([1, 2, 3, 4, 5])])),
            .bundle(OSCBundle(elements: [.message(OSCMessage("/nested", [.blob([])]))])),
        ])
        datagrams.append(general.encoded())
        let input = datagrams.map { $0.map { String(format: "%02x", $0) }.joined() }.joined(separator: "\n") + "\n"
        let parsed = try JSONSerialization.jsonObject(with: try PythonOSCPeer.run(["parse"], input: Data(input.utf8))) as? [[Any]]
        let expected = encoder.bundles(for: update).map(\.messages) + [general.messages]
        XCTAssertEqual(parsed?.count, expected.count)
        for (theirs, ours) in zip(parsed ?? [], expected) {
            XCTAssertEqual(try theirs.map(Self.message), ours)
        }
    }

    func testVeilDecodesWhatPythonOSCBuilds() throws {
        let sent = ExpressionUpdate(TestExpressions.random(seed: 43), time: 9.5)
        let head = try XCTUnwrap(sent.head)
        let q = head.unityQuaternion
        let request: [String: Any] = ["blend": sent.coefficients.mapValues(Double.init), "time": 9.5,
                                      "head": [q.x, q.y, q.z, q.w].map(Double.init)]
        let output = try PythonOSCPeer.run(["build"], input: JSONSerialization.data(withJSONObject: request))
        let built = try XCTUnwrap(JSONSerialization.jsonObject(with: output) as? [String: Any])
        let hexes = try XCTUnwrap(built["datagrams"] as? [String])
        let described = try XCTUnwrap(built["messages"] as? [[Any]])
        XCTAssertEqual(hexes.count, 2)
        for (hex, theirs) in zip(hexes, described) {
            let packet = try OSCPacket(decoding: Self.bytes(hex: hex))
            XCTAssertEqual(packet.messages, try theirs.map(Self.message))
        }
        // The nested bundle, as python-osc built it.
        let general = try OSCPacket(decoding: Self.bytes(hex: hexes[0]))
        XCTAssertEqual(general.messages.map(\.address), ["/veil/test", "/nested/empty", "/deeper", "/after"])
        XCTAssertEqual(general.messages[0].arguments, [.int32(-123_456), .float32(0.1), .string("héllo"), .blob([0, 1, 2, 3, 4])])
        // The VMC frame: every coefficient exact, the head within 1e-4 rad, whatever the order.
        var receiver = VMCReceiver()
        let update = try XCTUnwrap(receiver.receive(Self.bytes(hex: hexes[1])))
        XCTAssertEqual(update.coefficients, sent.coefficients)
        VMCTests.assertClose(try XCTUnwrap(update.head), head)
        XCTAssertEqual(update.time, 9.5)
        XCTAssertEqual(receiver.statistics.malformedMessages + receiver.statistics.unknownAddresses, 0)
    }

    // MARK: Running python-osc

    /// Runs osc_peer.py `mode` with `input` on stdin in python-osc's virtual environment. Fails
    /// (rather than skips) when the environment is missing: `make test` installs it.
    /// A message as osc_peer.py describes it.
    static func message(_ json: Any) throws -> OSCMessage {
        guard let object = json as? [String: Any], let address = object["address"] as? String,
              let args = object["args"] as? [[String: Any]] else { throw PythonOSCPeer.Failure("not a message: \(json)") }
        return OSCMessage(address, try args.map { arg -> OSCArgument in
            switch (arg["type"] as? String, arg["value"]) {
            case ("i", let value as NSNumber): return .int32(value.int32Value)
            case ("f", let value as NSNumber): return .float32(Float(value.doubleValue))
            case ("s", let value as String): return .string(value)
            case ("b", let value as [NSNumber]): return .blob(value.map(\.uint8Value))
            default: throw PythonOSCPeer.Failure("not an argument: \(arg)")
            }
        })
    }

    static func bytes(hex: String) throws -> [UInt8] {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { throw PythonOSCPeer.Failure("odd hex") }
        return try stride(from: 0, to: digits.count, by: 2).map { i in
            guard let byte = UInt8(String(decoding: digits[i..<(i + 2)], as: UTF8.self), radix: 16) else { throw PythonOSCPeer.Failure("bad hex") }
            return byte
        }
    }
}
