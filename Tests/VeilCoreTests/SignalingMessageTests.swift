import Foundation
import XCTest
@testable import VeilCore

/// The signaling messages' JSON: exact encodings, round trips, strict decoding, the documented examples.
final class SignalingMessageTests: XCTestCase {
    static let sdp = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n"

    static let clientGolden: [(ClientMessage, String)] = [
        (.join(room: "r1", user: "ana", token: "v1.a.b"), #"{"room":"r1","token":"v1.a.b","type":"join","user":"ana","v":1}"#),
        (.join(room: "r1", user: "ana", token: nil), #"{"room":"r1","type":"join","user":"ana","v":1}"#),
        (.offer(to: "ben", sdp: sdp), #"{"sdp":"v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n","to":"ben","type":"offer","v":1}"#),
        (.answer(to: "ana", sdp: "v=0\r\n"), #"{"sdp":"v=0\r\n","to":"ana","type":"answer","v":1}"#),
        (.ice(to: "ben", mline: 1, candidate: "candidate:1 1 UDP 1 10.0.0.1 9 typ host"), #"{"candidate":"candidate:1 1 UDP 1 10.0.0.1 9 typ host","mline":1,"to":"ben","type":"ice","v":1}"#),
        (.mute(muted: true), #"{"muted":true,"type":"mute","v":1}"#),
        (.leave, #"{"type":"leave","v":1}"#),
        (.ping(t: 123), #"{"t":123,"type":"ping","v":1}"#),
        (.ping(t: nil), #"{"type":"ping","v":1}"#),
    ]

    static let serverGolden: [(ServerMessage, String)] = [
        (.joined(.init(you: "ben", room: "r1", participants: [ParticipantInfo(user: "ana", muted: true)])),
         #"{"muted":false,"participants":[{"muted":true,"user":"ana"}],"resumed":false,"room":"r1","type":"joined","v":1,"you":"ben"}"#),
        (.joined(.init(you: "ben", room: "r1", muted: true, resumed: true, participants: [],
                       iceServers: [ICEServer(urls: ["turn:t.example:3478"], username: "u", credential: "c")])),
         #"{"iceServers":[{"credential":"c","urls":["turn:t.example:3478"],"username":"u"}],"muted":true,"participants":[],"resumed":true,"room":"r1","type":"joined","v":1,"you":"ben"}"#),
        (.participantJoined(user: "cy", muted: false), #"{"muted":false,"type":"participantJoined","user":"cy","v":1}"#),
        (.participantLeft(user: "cy", reason: .timeout), #"{"reason":"timeout","type":"participantLeft","user":"cy","v":1}"#),
        (.offer(from: "ana", sdp: "v=0\r\n"), #"{"from":"ana","sdp":"v=0\r\n","type":"offer","v":1}"#),
        (.answer(from: "ben", sdp: "v=0\r\n"), #"{"from":"ben","sdp":"v=0\r\n","type":"answer","v":1}"#),
        (.ice(from: "ana", mline: 0, candidate: ""), #"{"candidate":"","from":"ana","mline":0,"type":"ice","v":1}"#),
        (.muteChanged(user: "ana", muted: true), #"{"muted":true,"type":"muteChanged","user":"ana","v":1}"#),
        (.error(code: .roomFull, message: "room r1 is full"), #"{"code":"room_full","message":"room r1 is full","type":"error","v":1}"#),
        (.pong(t: 7), #"{"t":7,"type":"pong","v":1}"#),
    ]

    func testEveryMessageEncodesExactlyAndRoundTrips() throws {
        for (message, json) in Self.clientGolden {
            XCTAssertEqual(SignalingMessage.encode(message), json)
            XCTAssertEqual(try SignalingMessage.decode(ClientMessage.self, from: json), message)
        }
        for (message, json) in Self.serverGolden {
            XCTAssertEqual(SignalingMessage.encode(message), json)
            XCTAssertEqual(try SignalingMessage.decode(ServerMessage.self, from: json), message)
        }
        XCTAssertEqual(Set(Self.clientGolden.map(\.0.type)), ["join", "offer", "answer", "ice", "mute", "leave", "ping"])
        XCTAssertEqual(Set(Self.serverGolden.map(\.0.type)),
                       ["joined", "participantJoined", "participantLeft", "offer", "answer", "ice", "muteChanged", "error", "pong"])
    }

    func testKeysInAnyOrderAndOptionalFieldsDecode() throws {
        XCTAssertEqual(try SignalingMessage.decode(ClientMessage.self, from: #"{"v":1,"type":"join","user":"a","room":"r","token":null}"#),
                       .join(room: "r", user: "a", token: nil))
        XCTAssertEqual(try SignalingMessage.decode(ServerMessage.self, from: #"{"v":1,"type":"joined","you":"a","room":"r","participants":[{"user":"b"}]}"#),
                       .joined(.init(you: "a", room: "r", participants: [ParticipantInfo(user: "b")])))
        XCTAssertEqual(try SignalingMessage.decode(ServerMessage.self, from: #"{"v":1,"type":"error","code":"something_new","message":"?"}"#),
                       .error(code: SignalingErrorCode(rawValue: "something_new"), message: "?"), "unknown codes are readable")
    }

    func testStrictDecodingSaysWhatIsWrong() {
        let cases: [(String, SignalingErrorCode, String)] = [
            ("", .badMessage, "not valid JSON"),
            ("{nope", .badMessage, "not valid JSON"),
            ("[1,2]", .badMessage, "JSON object"),
            ("\"join\"", .badMessage, "JSON object"),
            (#"{"type":"ping"}"#, .badMessage, "\"v\""),
            (#"{"v":"1","type":"ping"}"#, .badMessage, "integer"),
            (#"{"v":2,"type":"ping"}"#, .unsupportedVersion, "version 2"),
            (#"{"v":1}"#, .badMessage, "\"type\""),
            (#"{"v":1,"type":"hello"}"#, .unknownType, "hello"),
            (#"{"v":1,"type":"joined","you":"a","room":"r","participants":[]}"#, .unknownType, "joined"),
            (#"{"v":1,"type":"ping","extra":1}"#, .badMessage, "unexpected field \"extra\""),
            (#"{"v":1,"type":"join","room":"r","token":"t"}"#, .badMessage, "needs field \"user\""),
            (#"{"v":1,"type":"join","room":"r","user":7,"token":"t"}"#, .badMessage, "\"user\" of \"join\" must be a string"),
            (#"{"v":1,"type":"join","room":"r r","user":"a","token":"t"}"#, .badMessage, "\"room\""),
            (#"{"v":1,"type":"join","room":"","user":"a","token":"t"}"#, .badMessage, "\"room\""),
            (#"{"v":1,"type":"offer","to":"b\n","sdp":"v=0"}"#, .badMessage, "\"to\""),
            (#"{"v":1,"type":"mute","muted":"yes"}"#, .badMessage, "true or false"),
            (#"{"v":1,"type":"ice","to":"b","mline":-1,"candidate":""}"#, .badMessage, "mline"),
            (#"{"v":1,"type":"ice","to":"b","mline":1.5,"candidate":""}"#, .badMessage, "mline"),
            (#"{"v":1,"type":"ping","t":"now"}"#, .badMessage, "integer"),
            (String(repeating: "[", count: 9) + String(repeating: "]", count: 9), .badMessage, "nested"),
            (#"{"v":1,"type":"ping","t":"# + String(repeating: "{", count: 50) + "}", .badMessage, "nested"),
        ]
        for (json, code, detail) in cases {
            XCTAssertThrowsError(try SignalingMessage.decode(ClientMessage.self, from: json), json) { error in
                guard let error = error as? SignalingError else { return XCTFail("\(json): \(error)") }
                XCTAssertEqual(error.code, code, "\(json): \(error)")
                XCTAssertTrue(error.message.contains(detail), "\(json): \(error.message)")
            }
        }
        XCTAssertThrowsError(try SignalingMessage.decode(ServerMessage.self, from: #"{"v":1,"type":"participantLeft","user":"a","reason":"bored"}"#))
    }

    func testSizeLimits() throws {
        let big = String(repeating: "a", count: SignalingMessage.maxSize + 1)
        XCTAssertThrowsError(try SignalingMessage.decode(ClientMessage.self, from: big)) {
            XCTAssertEqual(($0 as? SignalingError)?.code, .messageTooLarge)
        }
        let longSDP = String(repeating: "a", count: SignalingMessage.maxSDPLength + 1)
        XCTAssertThrowsError(try SignalingMessage.decode(ClientMessage.self, from: SignalingMessage.encode(ClientMessage.offer(to: "b", sdp: longSDP)))) {
            XCTAssertEqual(($0 as? SignalingError)?.code, .badMessage)
        }
        let maxSDP = String(repeating: "a", count: SignalingMessage.maxSDPLength)
        XCTAssertEqual(try SignalingMessage.decode(ClientMessage.self, from: SignalingMessage.encode(ClientMessage.offer(to: "b", sdp: maxSDP))),
                       .offer(to: "b", sdp: maxSDP))
        // Brackets inside strings are not nesting.
        let brackets = String(repeating: "[{", count: 1000)
        XCTAssertEqual(try SignalingMessage.decode(ClientMessage.self, from: SignalingMessage.encode(ClientMessage.offer(to: "b", sdp: brackets))),
                       .offer(to: "b", sdp: brackets))
        XCTAssertEqual(try SignalingMessage.decode(ClientMessage.self, from: #"{"v":1,"type":"offer","to":"b","sdp":"\"[[[[[[[[[[\\"}"#),
                       .offer(to: "b", sdp: "\"[[[[[[[[[[\\"))
    }

    func testNames() {
        for good in ["a", "ana", "Ana.B_c-d@e+f~g", "0", String(repeating: "x", count: 64)] {
            XCTAssertTrue(SignalingMessage.isValidName(good), good)
        }
        for bad in ["", " ", "a b", "zoë", "a/b", "a\nb", "a\"b", String(repeating: "x", count: 65), "name=x"] {
            XCTAssertFalse(SignalingMessage.isValidName(bad), bad)
        }
    }

    func testRandomBytesNeverCrashTheDecoder() {
        var state: UInt64 = 0x5EED
        func next() -> UInt64 { state = state &* 6364136223846793005 &+ 1442695040888963407; return state >> 33 }
        let alphabet = Array(#"{}[]":,0123456789-.etruaflsnvypjoim\ "#.utf8)
        for _ in 0..<3000 {
            let count = Int(next() % 80)
            let bytes = (0..<count).map { _ in next() % 4 == 0 ? UInt8(truncatingIfNeeded: next()) : alphabet[Int(next() % UInt64(alphabet.count))] }
            _ = try? SignalingMessage.decode(ClientMessage.self, from: bytes)
            _ = try? SignalingMessage.decode(ServerMessage.self, from: bytes)
        }
    }

    /// Every JSON example in docs/protocol.md is a valid message, and the document shows every type.
    func testTheProtocolDocumentsExamplesDecode() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/protocol.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        var client: Set<String> = [], server: Set<String> = []
        for block in text.components(separatedBy: "```json\n").dropFirst() {
            let json = block.components(separatedBy: "\n```").first ?? ""
            if let message = try? SignalingMessage.decode(ClientMessage.self, from: json) {
                client.insert(message.type)
            } else {
                do { server.insert(try SignalingMessage.decode(ServerMessage.self, from: json).type) } catch {
                    XCTFail("docs/protocol.md example does not decode (\(error)): \(json)")
                }
            }
        }
        XCTAssertEqual(client, ["join", "offer", "answer", "ice", "mute", "leave", "ping"])
        XCTAssertEqual(server.union(["offer", "answer", "ice"]),
                       ["joined", "participantJoined", "participantLeft", "offer", "answer", "ice", "muteChanged", "error", "pong"])
        XCTAssertTrue(text.contains("64 KiB"))
    }
}
