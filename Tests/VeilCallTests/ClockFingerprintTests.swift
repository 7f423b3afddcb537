import Foundation
import Synchronization
@testable import VeilCall
import VeilCore
import VeilServer
import XCTest

/// What a peer can learn of the sender's device from the times it receives: two calls placed by
/// one process, in different rooms under different names, each with its own peer. Every time a
/// peer sees (frame capture times and sequence numbers, RTCP sender reports) must be on a clock of
/// that connection's own, which neither equals nor follows the machine's uptime or the other call.
final class ClockFingerprintTests: XCTestCase {
    /// What one receiving peer saw of the sender.
    final class Seen: @unchecked Sendable {
        struct Frame { var frame: ExpressionFrame; var arrival: UInt64 }
        struct Report { var ssrc: UInt32; var ntpMicros: UInt64; var rtpTime: UInt32; var arrival: UInt64 }
        let frames = Mutex<[Frame]>([])
        let reports = Mutex<[Report]>([])
        let items = Mutex<[(type: UInt8, text: String)]>([])

        /// Reads RTCP as RFC 3550 lays it out (written here, independently of GStreamer's parser):
        /// sender reports (PT 200) and source description items (PT 202).
        func rtcp(_ bytes: [UInt8]) {
            let arrival = PeerConnection.mediaTimeMicros
            var offset = 0
            func word(_ at: Int) -> UInt32 { bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
            while offset + 4 <= bytes.count {
                let count = Int(bytes[offset] & 0x1F), type = bytes[offset + 1]
                let length = (Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3]) + 1) * 4
                guard bytes[offset] >> 6 == 2, offset + length <= bytes.count else { return }
                if type == 200, length >= 28 {
                    let seconds = UInt64(word(offset + 8)), fraction = UInt64(word(offset + 12))
                    let report = Report(ssrc: word(offset + 4), ntpMicros: seconds * 1_000_000 + (fraction * 1_000_000) >> 32,
                                        rtpTime: word(offset + 16), arrival: arrival)
                    reports.withLock { $0.append(report) }
                } else if type == 202 {
                    var at = offset + 4
                    for _ in 0..<count {
                        at += 4 // SSRC
                        while at < offset + length, bytes[at] != 0, at + 1 < offset + length {
                            let item = bytes[at], size = Int(bytes[at + 1])
                            guard at + 2 + size <= offset + length else { break }
                            let text = String(decoding: bytes[at + 2..<at + 2 + size], as: UTF8.self)
                            items.withLock { $0.append((item, text)) }
                            at += 2 + size
                        }
                        at = (at + 4) & ~3 // the chunk's terminating zeros, to a word boundary
                    }
                }
                offset += length
            }
        }
    }

    func testTwoCallsFromOneProcessShareNoClockAndRevealNoUptime() throws {
        let secret = ServerSecret.random()
        let server = RoomServer(configuration: .init(secret: secret, port: 0))
        let url = try server.start()
        defer { server.stop() }
        func session(_ user: String, room: String, tone: Double) throws -> CallSession {
            let token = try TokenAuthority(secret: secret).issue(room: room, user: user, lifetime: 600)
            return CallSession(configuration: .init(server: url, room: room, user: user, token: token, audioInput: .testTone(frequency: tone)))
        }
        // The process under test is ana in "north" and bea in "south"; carl and dora are the peers.
        let calls = [(sender: try session("ana", room: "north", tone: 440), receiver: try session("carl", room: "north", tone: 550),
                      from: "ana", to: "carl"),
                     (sender: try session("bea", room: "south", tone: 660), receiver: try session("dora", room: "south", tone: 770),
                      from: "bea", to: "dora")]
        let seen = calls.map { _ in Seen() }
        for (call, seen) in zip(calls, seen) {
            let from = call.from
            Task {
                for await (user, received) in call.receiver.expressionFrames where user == from {
                    seen.frames.withLock { $0.append(Seen.Frame(frame: received.frame, arrival: received.arrivalMediaTimeMicros)) }
                }
            }
            call.sender.start()
            call.receiver.start()
        }
        defer {
            let group = DispatchGroup()
            for session in calls.flatMap({ [$0.sender, $0.receiver] }) {
                group.enter()
                Task { await session.leave(); group.leave() }
            }
            _ = group.wait(timeout: .now() + 10)
        }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !calls.allSatisfy({ $0.receiver.peer(for: $0.from)?.isDataChannelOpen == true && $0.sender.participants == [$0.to] }) {
            Thread.sleep(forTimeInterval: 0.05)
        }
        for (call, seen) in zip(calls, seen) {
            let peer = try XCTUnwrap(call.receiver.peer(for: call.from), "\(call.to) has no connection to \(call.from) after 20 s")
            XCTAssertTrue(peer.isDataChannelOpen, "\(call.to)'s expression channel did not open")
            peer.observeIncomingRTCPForTesting { seen.rtcp($0) }
        }

        // The same frames, stamped with this device's media clock (its uptime), into both calls.
        var sent: [(sequence: UInt32, time: UInt64)] = []
        let start = PeerConnection.mediaTimeMicros
        for index in 0..<90 {
            let now = PeerConnection.mediaTimeMicros
            var expression = VeilCore.Expression()
            expression[.jawOpen] = Float(index % 10) / 10
            let frame = ExpressionFrame(sequence: UInt32(index), captureTimeMicros: now, state: .tracked, expression: expression)
            for call in calls { call.sender.send(frame) }
            sent.append((frame.sequence, now))
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
        // Sender reports come every second or so.
        while PeerConnection.mediaTimeMicros < start + 4_000_000, !seen.allSatisfy({ $0.reports.withLock { $0.count } >= 2 }) {
            Thread.sleep(forTimeInterval: 0.1)
        }

        let minute: Int64 = 60_000_000
        func far(_ a: Int64, _ b: Int64) -> Bool { abs(a &- b) > minute }
        let uptime = Int64(bitPattern: PeerConnection.mediaTimeMicros)
        let bootClock = Int64(((try? String(contentsOfFile: "/proc/uptime", encoding: .utf8))?.split(separator: " ").first.flatMap { Double($0) } ?? 0) * 1e6)
        var frameOffsets: [Int64] = [], reportOffsets: [Int64] = [], sequences: [Set<UInt32>] = []
        for (call, seen) in zip(calls, seen) {
            let frames = seen.frames.withLock { $0 }, reports = seen.reports.withLock { $0 }
            XCTAssertGreaterThanOrEqual(frames.count, 80, "\(call.to) received too few of \(call.from)'s frames")
            XCTAssertGreaterThanOrEqual(reports.count, 1, "\(call.to) received no RTCP sender report from \(call.from)")
            guard let first = frames.first, let report = reports.last else { continue }
            // What a peer can compare with this machine's clocks: a received time against when it
            // arrived (sent a few ms before; a report's time is its audio's capture, tens of ms before).
            let frameOffset = Int64(bitPattern: first.frame.captureTimeMicros) &- Int64(bitPattern: first.arrival)
            let reportOffset = Int64(bitPattern: report.ntpMicros) &- Int64(bitPattern: report.arrival)
            print("\(call.from) → \(call.to): frame clock \(first.frame.captureTimeMicros) µs, arrived at \(first.arrival) µs of uptime; sequence \(first.frame.sequence) (sent numbered 0…89); sender report \(report.ntpMicros) µs at \(report.arrival); \(frames.count) frames, \(reports.count) reports")
            for (value, what) in [(Int64(bitPattern: first.frame.captureTimeMicros), "a frame's capture time"), (Int64(bitPattern: report.ntpMicros), "a sender report's NTP time")] {
                XCTAssertTrue(far(value, uptime) && far(value, bootClock), "\(call.from) → \(call.to): \(what) is within a minute of this machine's uptime")
            }
            // The frames and the reports of one connection share its clock (what lip-sync needs):
            // both offsets agree to within the network and capture delays.
            XCTAssertLessThan(abs(frameOffset - reportOffset), 1_000_000, "\(call.from) → \(call.to): frames and sender reports are on different clocks")
            frameOffsets.append(frameOffset)
            reportOffsets.append(reportOffset)
            let numbers = Set(frames.map(\.frame.sequence))
            XCTAssertTrue(numbers.isDisjoint(with: sent.map(\.sequence)), "\(call.from) → \(call.to): sequence numbers as this device numbered them")
            sequences.append(numbers)
            // Each frame keeps its place: consecutive numbers are consecutive captures.
            if let (a, b) = zip(frames, frames.dropFirst()).first(where: { $1.frame.sequence &- $0.frame.sequence == 1 }) {
                let gap = Int64(bitPattern: b.frame.captureTimeMicros &- a.frame.captureTimeMicros)
                XCTAssertTrue((10_000...200_000).contains(gap), "\(call.from) → \(call.to): consecutive frames \(gap) µs apart")
            }
        }
        guard frameOffsets.count == 2, reportOffsets.count == 2 else { return }
        XCTAssertTrue(far(frameOffsets[0], frameOffsets[1]), "the two calls' frame clocks are within a minute of each other")
        XCTAssertTrue(far(reportOffsets[0], reportOffsets[1]), "the two calls' sender-report clocks are within a minute of each other")
        XCTAssertTrue(far(frameOffsets[0], 0) && far(frameOffsets[1], 0), "a call's frames carry this device's media clock")
        XCTAssertTrue(sequences[0].isDisjoint(with: sequences[1]), "both calls number frames alike")

        // RTP and RTCP identifiers: different per call, nothing of the machine or the user.
        let reports = seen.map { $0.reports.withLock { $0 } }
        if let a = reports[0].last, let b = reports[1].last {
            XCTAssertNotEqual(a.ssrc, b.ssrc)
            // RTP time (48 kHz) against the report's arrival: a random origin per stream.
            let rtpOffset = { (r: Seen.Report) in Int64(r.rtpTime) - Int64(r.arrival * 48 / 1000) % (1 << 32) }
            XCTAssertGreaterThan(abs((rtpOffset(a) - rtpOffset(b)) % (1 << 32)), 48_000, "both calls' RTP clocks start alike")
        }
        // The session descriptions each peer received.
        let descriptions = calls.map { $0.receiver.peer(for: $0.from)?.remoteDescriptionForTesting ?? "" }
        for (call, sdp) in zip(calls, descriptions) {
            let identifying = sdp.split(whereSeparator: \.isNewline).filter { ["o=", "a=fingerprint", "a=ice-ufrag", "a=ssrc"].contains(where: $0.hasPrefix) }
            print("\(call.from) → \(call.to) session description, its identifiers: \(identifying.joined(separator: " · "))")
        }
        // Identifiers a description carries: each call's own (the DTLS certificate included, which
        // GStreamer would otherwise share between every connection of a process).
        func values(_ attribute: String, in sdp: String) -> Set<String> {
            Set(sdp.split(whereSeparator: \.isNewline).filter { $0.hasPrefix(attribute) }.map { String($0.dropFirst(attribute.count)) })
        }
        // The certificate each peer was shown in the DTLS handshake is the one whose fingerprint the
        // description carries (GStreamer does not check this itself; a browser does).
        for (call, sdp) in zip(calls, descriptions) {
            let pem = try XCTUnwrap(call.receiver.peer(for: call.from)?.remoteCertificateForTesting, "\(call.to) saw no DTLS certificate")
            let base64 = pem.split(whereSeparator: \.isNewline).filter { !$0.hasPrefix("-----") }.joined()
            let der = try XCTUnwrap(Data(base64Encoded: base64), "the peer's certificate is not PEM")
            let fingerprint = SHA256.hash([UInt8](der)).map { String(format: "%02X", $0) }.joined(separator: ":")
            XCTAssertEqual(values("a=fingerprint:", in: sdp), ["sha-256 " + fingerprint], "\(call.from) → \(call.to): the handshake's certificate is not the described one")
        }
        for attribute in ["a=fingerprint:", "a=ice-ufrag:", "o=- "] {
            let (a, b) = (values(attribute, in: descriptions[0]), values(attribute, in: descriptions[1]))
            XCTAssertFalse(a.isEmpty || b.isEmpty, "no \(attribute) line in a session description")
            XCTAssertTrue(a.isDisjoint(with: b), "both calls' session descriptions carry the same \(attribute) \(a)")
        }

        let names = seen.map { $0.items.withLock { $0 } }
        let cnames = names.map { $0.filter { $0.type == 1 }.map(\.text) }
        print("RTCP source descriptions: \(names.map { $0.map { "\($0.type)=\($0.text)" } })")
        XCTAssertFalse(cnames[0].isEmpty || cnames[1].isEmpty, "no CNAME arrived")
        XCTAssertTrue(Set(cnames[0]).isDisjoint(with: cnames[1]), "both calls send the same CNAME")
        let host = ProcessInfo.processInfo.hostName.lowercased(), login = NSUserName().lowercased()
        for item in names.flatMap({ $0 }) {
            XCTAssertTrue([1, 6].contains(item.type), "an RTCP SDES item other than CNAME and TOOL: \(item)")
            XCTAssertFalse(!host.isEmpty && item.text.lowercased().contains(host), "the host name in RTCP: \(item.text)")
            XCTAssertFalse(login.count > 2 && item.text.lowercased().contains(login), "the login name in RTCP: \(item.text)")
        }
    }

    /// A connection's clock: its origin in the stated range whatever the uptime, every origin and
    /// sequence offset drawn anew, and exactly undone by the sender.
    func testEveryConnectionDrawsItsOwnClock() {
        var generator = SplitMix64(seed: 19)
        let uptimes: [UInt64] = [0, 5_000_000, 1 << 41, 1 << 47]
        var origins = Set<UInt64>(), sequences = Set<UInt32>()
        for index in 0..<400 {
            let now = uptimes[index % uptimes.count]
            let clock = ConnectionClock.random(at: now, using: &generator)
            let origin = clock.connectionMicros(ofLocalMicros: now)
            XCTAssertTrue(ConnectionClock.originRange.contains(origin), "origin \(origin) out of range")
            origins.insert(origin)
            sequences.insert(clock.sequenceOffset)
            let frame = ExpressionFrame(sequence: UInt32.max - 1, captureTimeMicros: now + 123, state: .lost)
            let out = clock.outgoing(frame)
            XCTAssertEqual(out.captureTimeMicros, origin + 123)
            XCTAssertEqual(clock.original(of: out), frame)
            XCTAssertEqual(clock.original(of: try! ExpressionFrame(decoding: out.encoded())), frame, "the wire keeps the connection's time")
        }
        XCTAssertEqual(origins.count, 400)
        XCTAssertGreaterThan(sequences.count, 395)
        // Spread over the range, not bunched at one end.
        let sorted = origins.sorted(), middle = (ConnectionClock.originRange.lowerBound + ConnectionClock.originRange.upperBound) / 2
        XCTAssertTrue((0.35...0.65).contains(Double(sorted.filter { $0 < middle }.count) / 400))
    }

    /// A connection's DTLS certificate: new every time, shaped like a browser's, and the
    /// fingerprint written into descriptions is the certificate's own.
    func testEveryConnectionMakesItsOwnCertificate() throws {
        let a = try XCTUnwrap(DTLSCertificate.make()), b = try XCTUnwrap(DTLSCertificate.make())
        XCTAssertNotEqual(a.fingerprint, b.fingerprint)
        for certificate in [a, b] {
            XCTAssertTrue(certificate.pem.contains("-----BEGIN CERTIFICATE-----") && certificate.pem.contains("-----BEGIN PRIVATE KEY-----"))
            let lines = certificate.pem.split(whereSeparator: \.isNewline)
            let body = lines.drop { $0 != "-----BEGIN CERTIFICATE-----" }.dropFirst().prefix { $0 != "-----END CERTIFICATE-----" }.joined()
            let der = try XCTUnwrap(Data(base64Encoded: body))
            XCTAssertEqual(certificate.fingerprint, "sha-256 " + SHA256.hash([UInt8](der)).map { String(format: "%02X", $0) }.joined(separator: ":"))
            // ECDSA P-256 (the curve's OID, 1.2.840.10045.3.1.7) and the common name "WebRTC".
            XCTAssertNotNil(der.range(of: Data([0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07])), "not a P-256 key")
            XCTAssertNotNil(der.range(of: Data("WebRTC".utf8)))
        }
        let sdp = "v=0\r\na=fingerprint:sha-256 00:11\r\nm=audio 9 UDP/TLS/RTP/SAVPF 96\r\na=fingerprint:sha-256 00:11\r\na=mid:audio0\r\n"
        XCTAssertEqual(a.describing(sdp), sdp.replacingOccurrences(of: "sha-256 00:11", with: a.fingerprint))
    }
}
