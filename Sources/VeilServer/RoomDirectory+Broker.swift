import Foundation
import VeilCore

// Rooms shared with other nodes: what the broker reports, applied to this node's rooms. The broker
// reports to one node in the order it changed its shared state, so the mirror of other nodes'
// participants that an `admitted` starts stays right as later events arrive.

extension RoomDirectory {
    mutating func handle(_ event: RoomBrokerEvent, at time: SignalingTime) -> [Action] {
        guard brokered else { return [] }
        switch event {
        case let .admitted(room, user, id, resumed, muted, others):
            return admitted(room: room, user: user, connection: id, resumed: resumed, muted: muted, others: others, at: time)
        case let .refused(room, user, id, code, message):
            guard connections[id]?.admission == Admission(room: room, user: user) else { return [] }
            connections.removeValue(forKey: id)
            let close: WebSocketCloseCode = code == .roomFull ? .roomFull : code == .serviceUnavailable ? .serviceUnavailable : .policyViolation
            return [.send(.error(code: code, message: message), to: id), .close(id, code: close), .log(.refused(room: room, user: user, code: code))]
        case let .joined(room, participant, _):
            guard var members = rooms[room] else { return [] } // no participant of this node there (any more)
            if let index = members.firstIndex(where: { $0.user == participant.user }) {
                // Known already (from an `admitted`, or before they moved nodes): only where they are changes.
                guard members[index].node != nil else { return [] } // ours: `replaced` says when it moves
                members[index].node = participant.node
                members[index].muted = participant.muted
                rooms[room] = members
                return []
            }
            members.append(Participant(user: participant.user, connection: nil, muted: participant.muted, node: participant.node))
            rooms[room] = members
            return broadcast(.participantJoined(user: participant.user, muted: participant.muted), in: room, except: participant.user)
        case let .left(room, user, reason):
            guard let member = rooms[room]?.first(where: { $0.user == user }), member.node != nil else { return [] }
            return remove(user: user, from: room, reason: reason)
        case let .muted(room, user, muted):
            guard let index = rooms[room]?.firstIndex(where: { $0.user == user }), rooms[room]?[index].node != nil,
                  rooms[room]?[index].muted != muted else { return [] }
            rooms[room]?[index].muted = muted
            return broadcast(.muteChanged(user: user, muted: muted), in: room, except: user)
        case let .relayed(room, to, message):
            guard let member = rooms[room]?.first(where: { $0.user == to }), member.node == nil,
                  let connection = member.connection else { return [] } // gone, or held: dropped as on one node
            return [.send(message, to: connection)]
        case let .replaced(room, user, node):
            guard let index = rooms[room]?.firstIndex(where: { $0.user == user }), rooms[room]?[index].node == nil else { return [] }
            var actions: [Action] = []
            if let old = rooms[room]?[index].connection {
                connections.removeValue(forKey: old)
                actions += [.send(.error(code: .replaced, message: "another connection joined as \(user) in \(room)"), to: old),
                            .close(old, code: .replaced)]
            }
            rooms[room]?[index].connection = nil
            rooms[room]?[index].heldSince = nil
            rooms[room]?[index].node = node
            if rooms[room]?.contains(where: { $0.node == nil }) != true { rooms[room] = nil }
            return actions
        case let .roomState(room, ours, others):
            return catchUp(room: room, ours: Set(ours), others: others, at: time)
        case .membershipLost(let reason):
            return rejoinEverybody(reason)
        }
    }

    /// `room` as the broker holds it, after this node missed some of its changes: whoever left,
    /// joined, (un)muted or took a seat of this node over meanwhile is told as if heard at the time.
    private mutating func catchUp(room: String, ours: Set<String>, others: [RemoteParticipant], at time: SignalingTime) -> [Action] {
        guard let members = rooms[room] else {
            // Seats nobody here holds any more (their leave was lost): given back.
            return ours.sorted().map { .broker(.leave(room: room, user: $0, reason: .timeout)) }
        }
        var actions: [Action] = []
        let now = Dictionary(others.map { ($0.user, $0) }, uniquingKeysWith: { first, _ in first })
        // This node's participants first: a seat taken over through another node is replaced, a seat gone is joined again.
        for member in members where member.node == nil && !ours.contains(member.user) {
            if let moved = now[member.user] {
                actions += handle(RoomBrokerEvent.replaced(room: room, user: member.user, node: moved.node), at: time)
            } else {
                if let id = member.connection {
                    connections.removeValue(forKey: id)
                    actions += [.send(.error(code: .serviceUnavailable, message: "this server lost your seat in \(room) while it was away: join again"), to: id),
                                .close(id, code: .serviceUnavailable)]
                }
                rooms[room]?.removeAll { $0.user == member.user }
                // This node's others in the room heard nothing of it either.
                actions += broadcast(.participantLeft(user: member.user, reason: .left), in: room, except: member.user)
                    + [.log(.left(room: room, user: member.user, reason: .left))]
            }
        }
        let known = Set(members.map(\.user))
        actions += ours.subtracting(known).sorted().map { .broker(.leave(room: room, user: $0, reason: .timeout)) }
        guard rooms[room]?.contains(where: { $0.node == nil }) == true else {
            rooms[room] = nil
            return actions
        }
        // Then the others, as they are now.
        for member in members where member.node != nil {
            if let current = now[member.user] {
                if current.muted != member.muted { actions += handle(RoomBrokerEvent.muted(room: room, user: member.user, muted: current.muted), at: time) }
            } else {
                actions += handle(RoomBrokerEvent.left(room: room, user: member.user, reason: .left), at: time)
            }
        }
        for participant in others { actions += handle(RoomBrokerEvent.joined(room: room, participant: participant, resumed: false), at: time) }
        return actions
    }

    private mutating func admitted(room: String, user: String, connection id: ConnectionID, resumed: Bool, muted: Bool,
                                   others: [RemoteParticipant], at time: SignalingTime) -> [Action] {
        guard connections[id]?.admission == Admission(room: room, user: user) else {
            // The connection went (or left) before the answer came: take the seat back, unless
            // another connection of this node holds it or asks for it.
            let holds = rooms[room]?.contains { $0.user == user && $0.node == nil } == true
                || connections.values.contains { $0.admission == Admission(room: room, user: user) }
            return holds ? [] : [.broker(.leave(room: room, user: user, reason: .left))]
        }
        var actions: [Action] = []
        // This node's participants stay as they are; the others are as the broker saw them when it admitted.
        var members = (rooms[room] ?? []).filter { $0.node == nil }
        if let index = members.firstIndex(where: { $0.user == user }) {
            // Two connections of this node asked for the same seat: the later one takes it over.
            if let old = members[index].connection, old != id {
                connections.removeValue(forKey: old)
                actions += [.send(.error(code: .replaced, message: "another connection joined as \(user) in \(room)"), to: old),
                            .close(old, code: .replaced)]
            }
            members.remove(at: index)
        }
        let known = Set(members.map(\.user))
        members += others.filter { !known.contains($0.user) && $0.user != user }
            .map { Participant(user: $0.user, connection: nil, muted: $0.muted, node: $0.node) }
        members.append(Participant(user: user, connection: id, muted: muted))
        rooms[room] = members
        connections[id]?.admission = nil
        connections[id]?.resetAllowances(joined: true, now: time.monotonic, configuration: configuration)
        connections[id]?.room = room
        connections[id]?.user = user
        let list = members.filter { $0.user != user }.map { ParticipantInfo(user: $0.user, muted: $0.muted) }
        actions.append(.send(.joined(.init(you: user, room: room, muted: muted, resumed: resumed,
                                           participants: list, iceServers: configuration.iceServers)), to: id))
        if !resumed { actions += broadcast(.participantJoined(user: user, muted: muted), in: room, except: user) }
        actions.append(.log(.joined(room: room, user: user, participants: members.count, resumed: resumed)))
        return actions
    }

    /// The broker no longer holds this node's participants: each connection in a room (or on its
    /// way in) is closed with `service_unavailable`, so that its client reconnects and joins again.
    private mutating func rejoinEverybody(_ reason: String) -> [Action] {
        var actions: [Action] = []
        for (id, connection) in connections.sorted(by: { $0.key < $1.key }) where connection.room != nil || connection.admission != nil {
            connections.removeValue(forKey: id)
            actions += [.send(.error(code: .serviceUnavailable, message: "\(reason): join again"), to: id),
                        .close(id, code: .serviceUnavailable)]
        }
        rooms.removeAll()
        return actions
    }
}
