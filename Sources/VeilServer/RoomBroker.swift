import Foundation
import VeilCore

/// Where the rooms of several `veil serve` nodes meet. Each node keeps its own connections in its
/// `RoomDirectory`; membership that spans nodes (who is in which room, on which node, muted or
/// not) and the messages between participants on different nodes go through a broker.
///
/// The directory talks to a broker in values: it returns `.broker(RoomBrokerCommand)` actions,
/// the server hands them to `perform`, and the broker answers with `RoomBrokerEvent`s that the
/// server feeds back to the directory (`.broker(event)`), in the order the broker saw them. A
/// single node needs no broker: its directory admits and relays by itself (the in-memory case).
///
/// Brokers are confined to the server's GLib loop: `perform` is called there, and `deliver` (given
/// to `start`) is called there too.
protocol RoomBroker: AnyObject {
    /// Starts (connects, registers the node) and delivers events to `deliver` from then on.
    /// - Throws: when the broker cannot be reached or refuses this node, with what to do about it.
    func start(deliver: @escaping (RoomBrokerEvent) -> Void) throws
    /// Carries out one command of the directory.
    func perform(_ command: RoomBrokerCommand)
    /// Stops: no more events. The node's participants leave the others' rooms when its
    /// registration runs out (as if it had died), unless they rejoin through another node first.
    func stop()
    /// What the broker reports about itself for `/health`: nil while it works, else why not.
    var problem: String? { get }
    /// How long the broker took to answer the node's heartbeats (`/metrics`).
    var roundTrips: DurationHistogram { get }
    /// The relays it sent on to other nodes, and their bytes as sent (`/metrics`).
    var forwarded: ServerMetrics.Tally { get }
}

/// A participant of a room as the broker knows them: on which node, muted or not.
public struct RemoteParticipant: Equatable, Sendable, Codable {
    /// The user.
    public var user: String
    /// The node their connection is on.
    public var node: String
    /// Whether they are muted.
    public var muted: Bool

    /// A participant.
    public init(user: String, node: String, muted: Bool) { self.user = user; self.node = node; self.muted = muted }

    enum CodingKeys: String, CodingKey { case user = "u", node = "n", muted = "m" }
}

/// A request of a node's directory to the broker.
public enum RoomBrokerCommand: Equatable, Sendable {
    /// Admit `user` to `room` through connection `connection` of this node, within `limit`
    /// participants across every node (the same user elsewhere is taken over, and does not count
    /// twice). Answered with `admitted` or `refused`.
    case admit(room: String, user: String, connection: ConnectionID, limit: Int)
    /// `user` of this node left `room` for `reason`; the other nodes tell their participants.
    case leave(room: String, user: String, reason: LeaveReason)
    /// `user` of this node (un)muted in `room`.
    case mute(room: String, user: String, muted: Bool)
    /// Hand `message` to `user` of `room`, whose connection is on `node`.
    case relay(room: String, to: String, node: String, message: ServerMessage)
}

/// What the broker reports to one node's directory.
public enum RoomBrokerEvent: Equatable, Sendable {
    /// `user` was admitted to `room` through `connection`; `others` are the room's other
    /// participants at that moment. `resumed` when the user was already in the room (another
    /// connection of theirs, on any node, is taken over), with their mute state kept in `muted`.
    case admitted(room: String, user: String, connection: ConnectionID, resumed: Bool, muted: Bool, others: [RemoteParticipant])
    /// `user` was not admitted to `room` through `connection`: `code` and `message` say why.
    case refused(room: String, user: String, connection: ConnectionID, code: SignalingErrorCode, message: String)
    /// A participant of another node joined `room` (or, `resumed`, moved their connection to `node`).
    case joined(room: String, participant: RemoteParticipant, resumed: Bool)
    /// A participant of another node left `room`.
    case left(room: String, user: String, reason: LeaveReason)
    /// A participant of another node (un)muted.
    case muted(room: String, user: String, muted: Bool)
    /// A message for this node's participant `to` in `room`.
    case relayed(room: String, to: String, message: ServerMessage)
    /// This node's participant `user` of `room` joined again through `node`, which took the session over.
    case replaced(room: String, user: String, node: String)
    /// What the broker holds of `room` now, for a node that may have missed its changes (it was
    /// away from the broker but kept its seats): `ours` are this node's users seated there, `others`
    /// everyone else. The directory brings its view of the room in line.
    case roomState(room: String, ours: [String], others: [RemoteParticipant])
    /// The broker lost this node's membership (it was taken for dead, or the broker's data is
    /// gone): its participants must join again.
    case membershipLost(reason: String)
}
