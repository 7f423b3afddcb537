import Foundation
import VeilCore

/// A message on a node's broker channel (`veil:node:<name>` in Redis): JSON written by the broker's
/// scripts (membership: admitted, refused, joined, left, muted, replaced, state) or by another node
/// (relay). Decoding it gives the `RoomBrokerEvent` for the node that receives it.
struct BrokerMessage: Codable, Equatable {
    /// admitted, refused, joined, left, muted, replaced, state, relay.
    var t: String
    var room: String
    var user: String?
    var to: String?
    var node: String?
    /// The connection an admission answers (its number on the node that asked).
    var c: UInt64?
    var muted: Bool?
    var resumed: Bool?
    var reason: String?
    var code: String?
    var message: String?
    var others: [RemoteParticipant]?
    var msg: ServerMessage?

    init(t: String, room: String, to: String? = nil, msg: ServerMessage? = nil) {
        self.t = t; self.room = room; self.to = to; self.msg = msg
    }

    enum CodingKeys: String, CodingKey { case t, room, user, to, node, c, muted, resumed, reason, code, message, others, msg }

    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        t = try c.decode(String.self, forKey: .t)
        room = try c.decode(String.self, forKey: .room)
        user = try c.decodeIfPresent(String.self, forKey: .user)
        to = try c.decodeIfPresent(String.self, forKey: .to)
        node = try c.decodeIfPresent(String.self, forKey: .node)
        self.c = try c.decodeIfPresent(UInt64.self, forKey: .c)
        muted = try c.decodeIfPresent(Bool.self, forKey: .muted)
        resumed = try c.decodeIfPresent(Bool.self, forKey: .resumed)
        reason = try c.decodeIfPresent(String.self, forKey: .reason)
        code = try c.decodeIfPresent(String.self, forKey: .code)
        message = try c.decodeIfPresent(String.self, forKey: .message)
        // Redis's Lua encodes an empty table as {}, not []: no others either way.
        others = (try? c.decodeIfPresent([RemoteParticipant].self, forKey: .others)) ?? nil
        msg = try c.decodeIfPresent(ServerMessage.self, forKey: .msg)
    }

    /// The JSON text.
    var text: String { SignalingMessage.encode(self) }

    /// The event for node `node`, or nil for a message it cannot use (it says why in `problem`).
    static func event(from text: String, forNode node: String) -> Result<RoomBrokerEvent, RedisError> {
        let message: BrokerMessage
        do {
            message = try JSONDecoder().decode(BrokerMessage.self, from: Data(text.utf8))
        } catch {
            return .failure(RedisError(description: "an unreadable message on the broker channel: \(error)"))
        }
        let room = message.room
        func need<T>(_ value: T?, _ name: String) throws(RedisError) -> T {
            guard let value else { throw RedisError(description: "a broker \(message.t) message without \(name)") }
            return value
        }
        do throws(RedisError) {
            switch message.t {
            case "admitted":
                return .success(.admitted(room: room, user: try need(message.user, "user"), connection: ConnectionID(try need(message.c, "c")),
                                          resumed: message.resumed ?? false, muted: message.muted ?? false,
                                          others: (message.others ?? []).filter { $0.node != node }))
            case "refused":
                return .success(.refused(room: room, user: try need(message.user, "user"), connection: ConnectionID(try need(message.c, "c")),
                                         code: SignalingErrorCode(rawValue: try need(message.code, "code")), message: message.message ?? ""))
            case "joined":
                return .success(.joined(room: room, participant: RemoteParticipant(user: try need(message.user, "user"), node: try need(message.node, "node"),
                                                                                   muted: message.muted ?? false),
                                        resumed: message.resumed ?? false))
            case "left":
                guard let reason = LeaveReason(rawValue: try need(message.reason, "reason")) else {
                    throw RedisError(description: "a broker left message with reason \(message.reason ?? "")")
                }
                return .success(.left(room: room, user: try need(message.user, "user"), reason: reason))
            case "muted":
                return .success(.muted(room: room, user: try need(message.user, "user"), muted: try need(message.muted, "muted")))
            case "replaced":
                return .success(.replaced(room: room, user: try need(message.user, "user"), node: try need(message.node, "node")))
            case "state":
                let everyone = message.others ?? []
                return .success(.roomState(room: room, ours: everyone.filter { $0.node == node }.map(\.user),
                                           others: everyone.filter { $0.node != node }))
            case "relay":
                return .success(.relayed(room: room, to: try need(message.to, "to"), message: try need(message.msg, "msg")))
            default:
                throw RedisError(description: "a broker message of unknown type \(message.t)")
            }
        } catch {
            return .failure(error)
        }
    }
}
