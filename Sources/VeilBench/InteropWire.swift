import VeilCore
import VeilDatagram
import VeilInterop
import VeilInteropNetwork

/// What Veil's own VMC and Live Link senders (`veil track --send`, `veil call --send`) put on the
/// network for a frame, as `veil bench` weighs it: each frame goes through an `InteropSender` for
/// each protocol, over loopback, to a socket here that receives every datagram and keeps its size.
final class InteropWire {
    /// The UDP payload sizes of the datagrams each protocol sent for one frame (none for a lost frame).
    struct Datagrams: Equatable {
        var vmc: [Int]
        var liveLink: [Int]
    }

    private let receiver: DatagramSocket
    private let vmc: InteropSender
    private let liveLink: InteropSender
    private var buffer = [UInt8](repeating: 0, count: 65_536)

    init() throws {
        receiver = try DatagramSocket(bindingTo: "127.0.0.1", port: 0)
        let port = receiver.localAddress.port
        vmc = try InteropSender(endpoint: InteropEndpoint(kind: .vmc, host: "127.0.0.1", port: port))
        liveLink = try InteropSender(endpoint: InteropEndpoint(kind: .liveLink, host: "127.0.0.1", port: port))
    }

    /// Sends `frame` both ways and returns what arrived.
    func send(_ frame: ExpressionFrame) throws -> Datagrams {
        Datagrams(vmc: try weigh(vmc, frame), liveLink: try weigh(liveLink, frame))
    }

    /// The sizes of the datagrams `sender` sent for `frame`, as received. Each frame's datagrams
    /// are read before the next frame is sent, so the socket's queue never overflows: a datagram
    /// that does not arrive within a second is an error, not a figure.
    private func weigh(_ sender: InteropSender, _ frame: ExpressionFrame) throws -> [Int] {
        let before = sender.statistics
        sender.send(frame)
        let after = sender.statistics
        guard after.datagramsDropped == before.datagramsDropped, after.datagramsFailed == before.datagramsFailed,
              after.datagramsRefused == before.datagramsRefused else {
            throw VeilError.invalidInput("the \(sender.endpoint.kind.displayName) sender could not send over loopback: "
                                         + (after.lastFailure ?? "its socket's buffer was full"))
        }
        var sizes: [Int] = []
        while sizes.count < after.datagramsSent - before.datagramsSent {
            guard try receiver.waitUntilReadable(timeout: 1), let reception = try receiver.receive(into: &buffer) else {
                throw VeilError.invalidInput("a \(sender.endpoint.kind.displayName) datagram sent over loopback did not arrive")
            }
            sizes.append(reception.count)
        }
        return sizes
    }
}
