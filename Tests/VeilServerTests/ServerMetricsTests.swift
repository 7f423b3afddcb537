import Foundation
import VeilCore
import VeilGLib
import VeilServer
import VeilTestSupport
import XCTest

/// `/metrics` on a real server, read by prometheus_client's parser (an implementation of the
/// format Veil did not write): what happened in the rooms is what it counts, and nothing in it
/// names a person.
final class ServerMetricsTests: LoopbackServerTestCase {
    static let sdp = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n"

    func scrape() throws -> (text: String, metrics: PrometheusText) {
        let answer = try httpGet(try XCTUnwrap(server.metricsURL))
        XCTAssertEqual(answer.status, 200)
        return (answer.body, try PrometheusText(parsing: answer.body))
    }

    func testTheMetricsCountJoinsRefusalsRelaysAndCutsInPrometheusFormat() throws {
        try startServer(rooms: .init(maximumParticipants: 2))
        let (_, fresh) = try scrape()
        XCTAssertEqual(fresh.value("veil_participants"), 0)
        XCTAssertEqual(fresh.value("veil_joins_total", ["kind": "new"]), 0)
        XCTAssertNil(fresh.family("veil_broker_up"), "a node alone has no broker")

        let alice = try join("r", "alice")
        let bob = try join("r", "bob")
        _ = alice.next { $0 == .participantJoined(user: "bob", muted: false) }
        alice.send(.offer(to: "bob", sdp: Self.sdp))
        XCTAssertEqual(bob.next { if case .offer = $0 { true } else { false } }, .offer(from: "alice", sdp: Self.sdp))
        bob.send(.answer(to: "alice", sdp: Self.sdp))
        XCTAssertEqual(alice.next { if case .answer = $0 { true } else { false } }, .answer(from: "bob", sdp: Self.sdp))
        alice.send(.ice(to: "bob", mline: 0, candidate: "candidate:1 1 UDP 2122252543 192.0.2.7 40000 typ host"))
        XCTAssertNotNil(bob.next { if case .ice = $0 { true } else { false } })

        // Refused: a full room, a token signed by another secret.
        let carol = try connect("carol")
        carol.send(.join(room: "r", user: "carol", token: try token("r", "carol")))
        XCTAssertEqual(carol.nextError(), .roomFull)
        let forged = try TokenAuthority(secret: .random()).issue(room: "r2", user: "mallory", lifetime: 600)
        let mallory = try connect("mallory")
        mallory.send(.join(room: "r2", user: "mallory", token: forged))
        XCTAssertEqual(mallory.nextError(), .tokenForged)
        // Cut by a limit: pings beyond the rate a stranger is allowed. Closed for the protocol: not JSON.
        let flooder = try connect("flooder")
        for _ in 0..<60 { flooder.send(.ping(t: nil)) }
        XCTAssertEqual(flooder.nextError(), .rateLimited)
        let garbler = try connect("garbler")
        garbler.sendText("{not json")
        XCTAssertEqual(garbler.nextError(), .badMessage)
        XCTAssertNotNil(garbler.waitClosed())
        XCTAssertNotNil(flooder.waitClosed())

        let (text, metrics) = try scrape()
        print("metrics after two joins, three relays, two refusals and two cuts:\n" + text.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n"))
        XCTAssertEqual(metrics.family("veil_joins")?.type, "counter")
        XCTAssertEqual(metrics.family("veil_participants")?.type, "gauge")
        XCTAssertEqual(metrics.value("veil_participants"), 2)
        XCTAssertEqual(metrics.value("veil_rooms"), 1)
        XCTAssertEqual(metrics.value("veil_joins_total", ["kind": "new"]), 2)
        XCTAssertEqual(metrics.value("veil_joins_total", ["kind": "resumed"]), 0)
        XCTAssertEqual(metrics.value("veil_join_refusals_total", ["reason": "room_full"]), 1)
        XCTAssertEqual(metrics.value("veil_join_refusals_total", ["reason": "token_forged"]), 1)
        XCTAssertEqual(metrics.value("veil_join_refusals_total", ["reason": "token_expired"]), 0)
        XCTAssertEqual(metrics.value("veil_relayed_messages_total", ["to": "participant"]), 3)
        XCTAssertEqual(metrics.value("veil_relayed_messages_total", ["to": "node"]), 0)
        XCTAssertGreaterThan(metrics.value("veil_relayed_bytes_total", ["to": "participant"]) ?? 0, Double(2 * Self.sdp.utf8.count))
        XCTAssertEqual(metrics.value("veil_connections_cut_total", ["limit": "rate_limited"]), 1)
        XCTAssertEqual(metrics.value("veil_connections_cut_total", ["limit": "slow_consumer"]), 0)
        XCTAssertEqual(metrics.value("veil_protocol_errors_total", ["code": "bad_message"]), 1)
        // Received: 2 joins, offer, answer, candidate, 2 refused joins, the flooder's pings (some),
        // and whatever pings the clients' timers sent; sent: at least joined ×2, participantJoined,
        // the three relays and four errors.
        XCTAssertGreaterThanOrEqual(metrics.value("veil_messages_received_total") ?? 0, 7)
        XCTAssertGreaterThan(metrics.value("veil_received_bytes_total") ?? 0, Double(2 * Self.sdp.utf8.count))
        XCTAssertGreaterThanOrEqual(metrics.value("veil_messages_sent_total") ?? 0, 10)
        XCTAssertGreaterThan(metrics.value("veil_sent_bytes_total") ?? 0, metrics.value("veil_relayed_bytes_total", ["to": "participant"]) ?? 0)
        XCTAssertGreaterThan(metrics.value("process_resident_memory_bytes") ?? 0, 1_000_000)
        XCTAssertGreaterThan(metrics.value("process_open_fds") ?? 0, 2)

        // Nobody is named: no room, user, token or address.
        for secret in ["alice", "bob", "mallory", "\"r\"", forged, try token("r", "alice"), "192.0.2.7", "127.0.0.1"] {
            XCTAssertFalse(text.contains(secret), "the metrics name \(secret)")
        }

        // Nor does the log: names and codes, no token, no participant's address (only the server's own, where it listens).
        let lines = log.waitForLines(count: 6)
        XCTAssertTrue(lines.contains { $0.hasSuffix("refuse room=r2 user=mallory code=token_forged") }, "\(lines)")
        for line in lines {
            for secret in [forged, try token("r", "alice"), "v1.", "192.0.2.7"] { XCTAssertFalse(line.contains(secret), line) }
            XCTAssertTrue(!line.contains("127.0.0.1") || line.contains(" listen url="), line)
        }

        // Participants leave: the gauges follow, the counters keep what happened.
        alice.send(.leave)
        XCTAssertEqual(bob.next { if case .participantLeft = $0 { true } else { false } }, .participantLeft(user: "alice", reason: .left))
        let (_, after) = try scrape()
        XCTAssertEqual(after.value("veil_participants"), 1)
        XCTAssertEqual(after.value("veil_leaves_total", ["reason": "left"]), 1)
        XCTAssertEqual(after.value("veil_joins_total", ["kind": "new"]), 2)
    }
}

/// The log in both formats says the same things; the JSON one is one object per line.
final class LogFormatTests: XCTestCase {
    func testEveryEventIsTheSameInTextAndInJSON() throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let events: [(RoomServerEvent.Kind, [String: Any])] = [
            (.listening(URL(string: "wss://veil.example.org:7443/ws")!), ["event": "listen", "url": "wss://veil.example.org:7443/ws"]),
            (.activity(.joined(room: "r", user: "u", participants: 2, resumed: true)),
             ["event": "join", "room": "r", "user": "u", "participants": 2, "resumed": true]),
            (.activity(.joined(room: "r", user: "u", participants: 1, resumed: false)),
             ["event": "join", "room": "r", "user": "u", "participants": 1, "resumed": false]),
            (.activity(.left(room: "r", user: "u", reason: .timeout)), ["event": "leave", "room": "r", "user": "u", "reason": "timeout"]),
            (.activity(.kicked(room: "r", user: "u", code: .rateLimited)),
             ["event": "leave", "room": "r", "user": "u", "reason": "kicked", "code": "rate_limited"]),
            (.activity(.dropped(room: "r", user: "u", grace: 3)), ["event": "drop", "room": "r", "user": "u", "grace": 3.0]),
            (.activity(.refused(room: "r", user: "u", code: .tokenForged)), ["event": "refuse", "room": "r", "user": "u", "code": "token_forged"]),
            (.activity(.closed(ConnectionID(7), code: .joinTimeout)), ["event": "close", "connection": 7, "code": "join_timeout"]),
            (.acceptFailed("Too many open files"), ["event": "accept-failed", "retry": 0.25, "error": "Too many open files"]),
            (.heldBack(kind: "refuse", lines: 12, codes: ["token_forged": 9, "token_expired": 3], seconds: 5),
             ["event": "held-back", "kind": "refuse", "lines": 12, "seconds": 5.0, "codes": ["token_forged": 9, "token_expired": 3]]),
            (.broker("Redis at 127.0.0.1:6379 answers again"), ["event": "broker", "note": "Redis at 127.0.0.1:6379 answers again"]),
            (.stopped, ["event": "stop"]),
        ]
        for (kind, expected) in events {
            let event = RoomServerEvent(date: date, kind: kind)
            let text = event.line(.text)
            XCTAssertEqual(text, event.description)
            XCTAssertTrue(text.hasPrefix("2023-11-14T22:13:20.250Z \(expected["event"] as! String)"), text)
            let json = event.line(.json)
            XCTAssertFalse(json.contains("\n"), json)
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], json)
            XCTAssertEqual(object["time"] as? String, "2023-11-14T22:13:20.250Z")
            var fields = object
            fields["time"] = nil
            XCTAssertEqual(NSDictionary(dictionary: fields), NSDictionary(dictionary: expected), json)
            // Every field the JSON line has is in the text line too (a false flag is left out there).
            for (key, value) in expected where key != "event" && (value as? Bool) != false {
                XCTAssertTrue(text.contains(" \(key)"), "\(key) missing from \(text)")
            }
        }
        XCTAssertEqual(RoomServerEvent(date: date, kind: .activity(.dropped(room: "r", user: "u", grace: 3))).description,
                       "2023-11-14T22:13:20.250Z drop room=r user=u grace=3.0s")
        XCTAssertEqual(RoomServerEvent(date: date, kind: .acceptFailed("x")).description,
                       #"2023-11-14T22:13:20.250Z accept-failed retry=0.25s error="x""#)
        let note = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(LogFormat.json.note("a \"quoted\" note", at: date).utf8)) as? [String: String])
        XCTAssertEqual(note, ["event": "note", "message": "a \"quoted\" note", "time": "2023-11-14T22:13:20.250Z"])
    }
}

/// Nodes sharing rooms through Redis: what crosses between them shows on both sides' /metrics,
/// with the broker's round trips, and the balancer does not pass /metrics on; `--log-format json`
/// writes every line as an object.
extension SharedRoomsTests {
    func testOffersAcrossNodesShowOnBothNodesAndTheLogsAreJSON() throws {
        cluster = try ServiceCluster(nodes: 3, arguments: ["--log-format", "json"])
        let (alice, _) = try join("alice", room: "r", at: cluster.nodeURLs[0])
        let (bob, _) = try join("bob", room: "r", at: cluster.nodeURLs[1])
        _ = alice.next { $0 == .participantJoined(user: "bob", muted: false) }
        alice.send(.offer(to: "bob", sdp: ServerMetricsTests.sdp))
        XCTAssertEqual(bob.next(timeout: 5) { if case .offer = $0 { true } else { false } }, .offer(from: "alice", sdp: ServerMetricsTests.sdp))
        func metrics(_ node: Int) throws -> PrometheusText {
            let url = URL(string: "http://127.0.0.1:\(cluster.nodeURLs[node].port ?? 0)/metrics")!
            let answer = try httpGet(url)
            XCTAssertEqual(answer.status, 200)
            return try PrometheusText(parsing: answer.body)
        }
        // Heartbeats go every 0.5 s: wait for a few round trips.
        var one = try metrics(0)
        let deadline = Date().addingTimeInterval(10)
        while (one.value("veil_broker_round_trip_seconds_count") ?? 0) < 2, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.25)
            one = try metrics(0)
        }
        let two = try metrics(1)
        XCTAssertEqual(one.value("veil_relayed_messages_total", ["to": "node"]), 1, "node1 sent alice's offer on to node2")
        XCTAssertEqual(two.value("veil_relayed_messages_total", ["to": "participant"]), 1, "node2 handed it to bob")
        XCTAssertEqual(one.value("veil_participants"), 1)
        XCTAssertEqual(two.value("veil_participants"), 1)
        XCTAssertEqual(one.value("veil_node_info", ["node": "node1"]), 1)
        XCTAssertEqual(two.value("veil_broker_up"), 1)
        let trips = try XCTUnwrap(one.value("veil_broker_round_trip_seconds_count"))
        let sum = try XCTUnwrap(one.value("veil_broker_round_trip_seconds_sum"))
        XCTAssertGreaterThanOrEqual(trips, 2)
        XCTAssertEqual(one.value("veil_broker_round_trip_seconds_bucket", ["le": "+Inf"]), trips)
        XCTAssertEqual(one.family("veil_broker_round_trip_seconds")?.type, "histogram")
        // Not through the balancer: deploy/haproxy.cfg keeps the nodes' metrics off the public address.
        let balancer = try XCTUnwrap(cluster.balancerURL)
        XCTAssertEqual(try httpGet(URL(string: "http://127.0.0.1:\(balancer.port ?? 0)/metrics")!).status, 404)
        XCTAssertEqual(try httpGet(URL(string: "http://127.0.0.1:\(balancer.port ?? 0)/health")!).status, 200)
        print(String(format: "node1's broker round trips: %.0f, mean %.2f ms", trips, 1000 * sum / trips))

        // The logs: every line of stdout and stderr an object with a time and an event; joins named
        // by room and user; no token, no secret anywhere.
        let secret = try String(contentsOf: cluster.secretFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        for node in cluster.nodes {
            let lines = node.text.split(separator: "\n").map(String.init)
            XCTAssertFalse(lines.isEmpty)
            for line in lines {
                let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
                XCTAssertNotNil(object["time"] as? String, line)
                XCTAssertNotNil(object["event"] as? String, line)
            }
            XCTAssertFalse(node.text.contains(secret), "\(node.name) logged its secret")
            XCTAssertFalse(node.text.contains("v1."), "\(node.name) logged a token")
        }
        let joins = cluster.nodes[1].text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }.filter { $0["event"] as? String == "join" }
        XCTAssertEqual(joins.first?["user"] as? String, "bob")
        XCTAssertEqual(joins.first?["room"] as? String, "r")
        XCTAssertEqual(joins.first?["participants"] as? Int, 2)
    }
}
