import Foundation
import VeilCore
@testable import VeilServer
import XCTest

/// The room state machine of a node that shares its rooms through a broker: joins wait for the
/// broker's admission, relays to participants of other nodes go through it, and what it reports of
/// other nodes reaches this node's participants. No broker here: its answers are fed by hand.
final class RoomDirectoryBrokerTests: XCTestCase {
    typealias Action = RoomDirectory.Action
    typealias Harness = RoomDirectoryTests.Harness

    func brokered() -> Harness {
        var h = Harness()
        h.directory = RoomDirectory(configuration: .init(maximumParticipants: 3), tokens: h.authority, brokered: true)
        return h
    }

    func testAJoinWaitsForTheBrokersAdmission() {
        var h = brokered()
        let (a, asked) = h.join("r", "alice")
        XCTAssertEqual(asked, [.broker(.admit(room: "r", user: "alice", connection: a, limit: 3))])
        XCTAssertFalse(h.directory.isJoined(a))
        // Until the answer, the connection is on its way in: no second join, nothing to relay.
        XCTAssertEqual(h.send(.join(room: "r", user: "alice", token: h.token("r", "alice")), from: a).first,
                       .send(.error(code: .alreadyJoined, message: "this connection is already in room r; send leave first"), to: a))
        XCTAssertEqual(h.send(.offer(to: "bob", sdp: "v=0\r\n"), from: a), [.send(.error(code: .notJoined, message: "join a room first"), to: a)])
        let bob = RemoteParticipant(user: "bob", node: "n2", muted: true)
        let answer = h.handle(.broker(.admitted(room: "r", user: "alice", connection: a, resumed: false, muted: false, others: [bob])))
        XCTAssertEqual(answer, [.send(.joined(.init(you: "alice", room: "r", participants: [ParticipantInfo(user: "bob", muted: true)])), to: a),
                                .log(.joined(room: "r", user: "alice", participants: 2, resumed: false))])
        XCTAssertTrue(h.directory.isJoined(a))
        XCTAssertEqual(h.directory.participantCount, 1, "only this node's participants count here")
    }

    func testRelaysToOtherNodesGoThroughTheBrokerAndTheirNewsReachesUs() {
        var h = brokered()
        let (a, _) = h.join("r", "alice")
        _ = h.handle(.broker(.admitted(room: "r", user: "alice", connection: a, resumed: false, muted: false, others: [])))
        let sdp = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
        XCTAssertEqual(h.handle(.broker(.joined(room: "r", participant: RemoteParticipant(user: "bob", node: "n2", muted: false), resumed: false))),
                       [.send(.participantJoined(user: "bob", muted: false), to: a)])
        XCTAssertEqual(h.send(.offer(to: "bob", sdp: sdp), from: a),
                       [.broker(.relay(room: "r", to: "bob", node: "n2", message: .offer(from: "alice", sdp: sdp)))])
        XCTAssertEqual(h.handle(.broker(.relayed(room: "r", to: "alice", message: .answer(from: "bob", sdp: sdp)))),
                       [.send(.answer(from: "bob", sdp: sdp), to: a)])
        XCTAssertEqual(h.send(.mute(muted: true), from: a), [.broker(.mute(room: "r", user: "alice", muted: true))])
        XCTAssertEqual(h.handle(.broker(.muted(room: "r", user: "bob", muted: true))), [.send(.muteChanged(user: "bob", muted: true), to: a)])
        // Bob moves to another node: no news for alice, but relays follow him.
        XCTAssertEqual(h.handle(.broker(.joined(room: "r", participant: RemoteParticipant(user: "bob", node: "n3", muted: true), resumed: true))), [])
        XCTAssertEqual(h.send(.ice(to: "bob", mline: 0, candidate: "c"), from: a),
                       [.broker(.relay(room: "r", to: "bob", node: "n3", message: .ice(from: "alice", mline: 0, candidate: "c")))])
        XCTAssertEqual(h.handle(.broker(.left(room: "r", user: "bob", reason: .timeout))),
                       [.send(.participantLeft(user: "bob", reason: .timeout), to: a), .log(.left(room: "r", user: "bob", reason: .timeout))])
        // Alice leaves: the broker hears of it, and the room's mirror goes with her.
        XCTAssertEqual(h.send(.leave, from: a), [.log(.left(room: "r", user: "alice", reason: .left)),
                                                 .broker(.leave(room: "r", user: "alice", reason: .left))])
        XCTAssertEqual(h.directory.roomCount, 0)
        XCTAssertEqual(h.handle(.broker(.joined(room: "r", participant: RemoteParticipant(user: "carol", node: "n2", muted: false), resumed: false))), [],
                       "news of a room this node has nobody in is not kept")
    }

    func testRefusalsTakeoversAndALostMembership() {
        var h = brokered()
        let (a, _) = h.join("r", "alice")
        XCTAssertEqual(h.handle(.broker(.refused(room: "r", user: "alice", connection: a, code: .roomFull, message: "room r is full (3 participants)"))),
                       [.send(.error(code: .roomFull, message: "room r is full (3 participants)"), to: a), .close(a, code: .roomFull),
                        .log(.refused(room: "r", user: "alice", code: .roomFull))])
        let (b, _) = h.join("r", "bob")
        _ = h.handle(.broker(.admitted(room: "r", user: "bob", connection: b, resumed: false, muted: false, others: [])))
        // Bob joined again through node n2: this connection is replaced.
        XCTAssertEqual(h.handle(.broker(.replaced(room: "r", user: "bob", node: "n2"))),
                       [.send(.error(code: .replaced, message: "another connection joined as bob in r"), to: b), .close(b, code: .replaced)])
        XCTAssertEqual(h.directory.participantCount, 0)
        // An answer for a connection that went meanwhile gives the seat back.
        let (c, _) = h.join("r", "carol")
        _ = h.handle(.disconnected(c))
        XCTAssertEqual(h.handle(.broker(.admitted(room: "r", user: "carol", connection: c, resumed: false, muted: false, others: []))),
                       [.broker(.leave(room: "r", user: "carol", reason: .left))])
        // The broker lost this node's seats: everyone in a room is asked to join again.
        let (d, _) = h.join("r", "dave")
        _ = h.handle(.broker(.admitted(room: "r", user: "dave", connection: d, resumed: false, muted: false, others: [])))
        let lost = h.handle(.broker(.membershipLost(reason: "this server was away")))
        XCTAssertEqual(lost, [.send(.error(code: .serviceUnavailable, message: "this server was away: join again"), to: d),
                              .close(d, code: .serviceUnavailable)])
        XCTAssertEqual(h.directory.roomCount, 0)
    }

    /// Back from an absence that kept its seats, a node hears the rooms' state: whoever left,
    /// joined, (un)muted or took one of its seats over meanwhile is told as if heard at the time.
    func testARoomsStateCatchesUpWithWhatThisNodeMissed() throws {
        var h = brokered()
        let (a, _) = h.join("r", "alice")
        let (bob, carol) = (RemoteParticipant(user: "bob", node: "n2", muted: false), RemoteParticipant(user: "carol", node: "n2", muted: false))
        _ = h.handle(.broker(.admitted(room: "r", user: "alice", connection: a, resumed: false, muted: false, others: [bob, carol])))
        let (d, _) = h.join("r", "dave")
        _ = h.handle(.broker(.admitted(room: "r", user: "dave", connection: d, resumed: false, muted: false, others: [bob, carol])))
        // Unheard meanwhile: bob left, carol muted, erin joined on n3, dave took his seat over
        // through n3, and the leave of this node's "ghost" never reached Redis.
        let state = #"{"t":"state","room":"r","others":[{"u":"alice","n":"n1","m":false},{"u":"ghost","n":"n1","m":false},"#
            + #"{"u":"carol","n":"n2","m":true},{"u":"erin","n":"n3","m":false},{"u":"dave","n":"n3","m":false}]}"#
        let event = try BrokerMessage.event(from: state, forNode: "n1").get()
        XCTAssertEqual(event, .roomState(room: "r", ours: ["alice", "ghost"],
                                         others: [RemoteParticipant(user: "carol", node: "n2", muted: true), RemoteParticipant(user: "erin", node: "n3", muted: false),
                                                  RemoteParticipant(user: "dave", node: "n3", muted: false)]))
        XCTAssertEqual(h.handle(.broker(event)), [
            .send(.error(code: .replaced, message: "another connection joined as dave in r"), to: d), .close(d, code: .replaced),
            .broker(.leave(room: "r", user: "ghost", reason: .timeout)),
            .send(.participantLeft(user: "bob", reason: .left), to: a), .log(.left(room: "r", user: "bob", reason: .left)),
            .send(.muteChanged(user: "carol", muted: true), to: a),
            .send(.participantJoined(user: "erin", muted: false), to: a),
        ])
        XCTAssertEqual(h.send(.offer(to: "dave", sdp: "v=0\r\n"), from: a),
                       [.broker(.relay(room: "r", to: "dave", node: "n3", message: .offer(from: "alice", sdp: "v=0\r\n")))])
        // A seat of this node gone altogether: its holder joins again, and this node's others in
        // the room see it leave.
        let carolNow = RemoteParticipant(user: "carol", node: "n2", muted: true)
        let (f, _) = h.join("r", "frank")
        _ = h.handle(.broker(.admitted(room: "r", user: "frank", connection: f, resumed: false, muted: false,
                                       others: [carolNow, RemoteParticipant(user: "erin", node: "n3", muted: false),
                                                RemoteParticipant(user: "dave", node: "n3", muted: false)])))
        XCTAssertEqual(h.handle(.broker(.roomState(room: "r", ours: ["frank"], others: [carolNow]))), [
            .send(.error(code: .serviceUnavailable, message: "this server lost your seat in r while it was away: join again"), to: a),
            .close(a, code: .serviceUnavailable),
            .send(.participantLeft(user: "alice", reason: .left), to: f), .log(.left(room: "r", user: "alice", reason: .left)),
            .send(.participantLeft(user: "erin", reason: .left), to: f), .log(.left(room: "r", user: "erin", reason: .left)),
            .send(.participantLeft(user: "dave", reason: .left), to: f), .log(.left(room: "r", user: "dave", reason: .left)),
        ])
        // The last of them gone too: the room's mirror goes.
        XCTAssertEqual(h.handle(.broker(.roomState(room: "r", ours: [], others: [carolNow]))), [
            .send(.error(code: .serviceUnavailable, message: "this server lost your seat in r while it was away: join again"), to: f),
            .close(f, code: .serviceUnavailable), .log(.left(room: "r", user: "frank", reason: .left)),
        ])
        XCTAssertEqual(h.directory.roomCount, 0)
        // The state of a room nobody here is in gives back the seats Redis still holds for this node.
        XCTAssertEqual(h.handle(.broker(.roomState(room: "q", ours: ["zoe"], others: []))), [.broker(.leave(room: "q", user: "zoe", reason: .timeout))])
    }

    /// What the scripts publish, as cjson writes it, read back into events.
    func testBrokerMessagesFromTheScripts() throws {
        let admitted = #"{"t":"admitted","room":"r","user":"alice","c":7,"resumed":false,"muted":false,"others":[{"u":"bob","n":"n2","m":true},{"u":"eve","n":"n1","m":false}]}"#
        XCTAssertEqual(try BrokerMessage.event(from: admitted, forNode: "n1").get(),
                       .admitted(room: "r", user: "alice", connection: ConnectionID(7), resumed: false, muted: false,
                                 others: [RemoteParticipant(user: "bob", node: "n2", muted: true)]))
        // Lua's cjson writes an empty list as {}.
        let alone = #"{"t":"admitted","room":"r","user":"alice","c":7,"resumed":true,"muted":true,"others":{}}"#
        XCTAssertEqual(try BrokerMessage.event(from: alone, forNode: "n1").get(),
                       .admitted(room: "r", user: "alice", connection: ConnectionID(7), resumed: true, muted: true, others: []))
        XCTAssertEqual(try BrokerMessage.event(from: #"{"t":"left","room":"r","user":"bob","reason":"timeout"}"#, forNode: "n1").get(),
                       .left(room: "r", user: "bob", reason: .timeout))
        let relay = BrokerMessage(t: "relay", room: "r", to: "alice", msg: .ice(from: "bob", mline: 0, candidate: "c")).text
        XCTAssertEqual(try BrokerMessage.event(from: relay, forNode: "n1").get(), .relayed(room: "r", to: "alice", message: .ice(from: "bob", mline: 0, candidate: "c")))
        for bad in ["not json", #"{"t":"left","room":"r","user":"bob","reason":"bored"}"#, #"{"t":"what","room":"r"}"#, #"{"t":"joined","room":"r"}"#] {
            XCTAssertThrowsError(try BrokerMessage.event(from: bad, forNode: "n1").get(), bad)
        }
    }
}
