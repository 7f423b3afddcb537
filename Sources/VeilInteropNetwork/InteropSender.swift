import Foundation
import VeilCore
import VeilDatagram
import VeilInterop

/// Sends Veil's expression frames to one VMC Marionette or Unreal Live Link source over UDP, as
/// they come, never waiting: a datagram that does not fit the socket's buffer is dropped and
/// counted, and a receiver that is not running costs nothing but a count.
///
/// Confined to the thread that calls `send` (the capture loop's): not `Sendable`.
public final class InteropSender {
    /// What was sent, dropped and refused so far.
    public struct Statistics: Equatable, Sendable, Codable {
        /// Tracked frames encoded and handed to the socket.
        public var framesSent = 0
        /// Lost frames, for which nothing is sent.
        public var framesLost = 0
        /// Datagrams handed to the network.
        public var datagramsSent = 0
        /// Their payload bytes (UDP and IP headers not counted).
        public var bytesSent = 0
        /// Datagrams dropped because the socket's send buffer was full.
        public var datagramsDropped = 0
        /// Datagrams dropped because the receiver's host answered "port unreachable" to an earlier one.
        public var datagramsRefused = 0
        /// Datagrams that failed otherwise (no route, too large); `lastFailure` says why.
        public var datagramsFailed = 0
        /// The most recent failure, refusal or encoding error, for the summary.
        public var lastFailure: String?

        /// Nothing sent yet.
        public init() {}
    }

    /// Where the frames go, as given.
    public let endpoint: InteropEndpoint
    /// The address the socket sends to (the endpoint's host resolved).
    public let address: DatagramAddress
    /// What was sent, dropped and refused so far.
    public private(set) var statistics = Statistics()
    private var encoder: InteropFrameEncoder
    private let socket: DatagramSocket

    /// A sender to `endpoint`, with Live Link frame times counted at `framesPerSecond`. Throws
    /// `DatagramError` when the host does not resolve or cannot be reached from this machine.
    public init(endpoint: InteropEndpoint, framesPerSecond: Int32 = 30,
                subjectName: String = InteropFrameEncoder.defaultSubjectName) throws {
        self.endpoint = endpoint
        socket = try DatagramSocket(connectingTo: endpoint.host, port: endpoint.port)
        guard let peer = socket.peer else { throw DatagramError.unreachable }
        address = peer
        encoder = InteropFrameEncoder(kind: endpoint.kind, deviceID: UUID().uuidString, subjectName: subjectName,
                                      framesPerSecond: framesPerSecond)
    }

    /// Sends `frame` (after the privacy filter: what goes out is exactly what a call would carry).
    /// Never throws and never waits: what cannot be sent is counted in `statistics`.
    public func send(_ frame: ExpressionFrame) {
        guard frame.state == .tracked else { statistics.framesLost += 1; return }
        let datagrams: [[UInt8]]
        do {
            datagrams = try encoder.datagrams(for: frame)
        } catch {
            statistics.lastFailure = "\(error)"
            return
        }
        statistics.framesSent += 1
        for datagram in datagrams {
            do {
                switch try socket.send(datagram) {
                case .sent:
                    statistics.datagramsSent += 1
                    statistics.bytesSent += datagram.count
                case .wouldBlock:
                    statistics.datagramsDropped += 1
                case .refused:
                    statistics.datagramsRefused += 1
                    statistics.lastFailure = "nothing listens at \(address) (port unreachable)"
                }
            } catch {
                statistics.datagramsFailed += 1
                statistics.lastFailure = "\(error)"
            }
        }
    }
}
