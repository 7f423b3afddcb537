import Foundation
import Synchronization
import VeilCore
import VeilDatagram
import VeilExpressionSource
import VeilInterop

/// A face from a VMC Performer or the Live Link Face app (an iPhone's ARKit tracking), as a call
/// takes one from its camera: a UDP socket bound to the endpoint's port, read on a thread of its
/// own, each expression through the privacy stage (`ExpressionPrivacy`) and handed over as an
/// `ExpressionFrame` stamped on the given clock at its arrival; lost frames, 30 a second, while no
/// expression comes (`InteropFaceReceiver` decides what and when).
///
/// The loop waits on the socket until a datagram is queued or a frame is due, then drains at most
/// `Configuration.batchLimit` datagrams into one fixed buffer before it looks at the time again: a
/// flood neither stalls the frames nor grows memory (what the loop cannot take, the kernel drops
/// from the socket's bounded queue).
///
/// `@unchecked Sendable`: the receiver, privacy stage and sequence are touched only by the loop's
/// thread; what other threads read sits behind a `Mutex` (statistics) or in `ExpressionSourceThread`.
public final class InteropFaceSource: ExpressionSource, @unchecked Sendable {
    /// Where to listen, whom to accept and how to time the frames.
    public struct Configuration: Sendable {
        /// The protocol, the sender to accept (`host`; empty: the first that sends a datagram
        /// that decodes) and the port to listen on, on every local address.
        public var endpoint: InteropEndpoint
        /// The local address to listen on; empty: every one (IPv4 and IPv6).
        public var listenHost = ""
        /// The privacy stage applied to every expression (as a camera's: `PrivacyLevel.default`).
        public var privacy = PrivacyLevel.default
        /// Times the strict level's own blinks.
        public var privacySeed = UInt64.random(in: 0...UInt64.max)
        /// Lost and tracked frames' timing (`InteropFaceReceiver.Configuration`).
        public var lostAfterMicros: UInt64 = 100_000
        public var lostFrameIntervalMicros: UInt64 = 33_333
        public var minimumFrameIntervalMicros: UInt64 = 16_000
        /// Most datagrams read per wake-up before the loop gives out due frames.
        public var batchLimit = 64
        /// Where the first of each kind of event goes (the sender taken, bad datagrams by kind);
        /// called on the loop's thread.
        public var log: @Sendable (String) -> Void = { _ in }

        /// A configuration for `endpoint`.
        public init(endpoint: InteropEndpoint) { self.endpoint = endpoint }
    }

    /// What came in and went out so far.
    public typealias Statistics = InteropFaceReceiver<Sender>.Statistics

    /// A sender as the source tells senders apart: by host, whatever port it sends from.
    public struct Sender: Hashable, Sendable, CustomStringConvertible {
        /// The host's address at port 0 (`DatagramAddress.hostAddress`).
        public let address: DatagramAddress
        public init(_ address: DatagramAddress) { self.address = address.hostAddress }
        /// The numeric host: `192.168.1.20`, `::1`.
        public var description: String { address.host }
    }

    public let configuration: Configuration
    /// The local address and port the socket listens on.
    public var localAddress: DatagramAddress { socket.localAddress }
    /// The addresses the endpoint's host resolved to (empty: any sender, the first kept).
    public let expectedSenders: Set<Sender>
    private let socket: DatagramSocket
    private let clock: @Sendable () -> UInt64
    private let shared = Mutex(Statistics())
    private let loop: ExpressionSourceThread

    /// Opens the socket: bound to `configuration.endpoint.port` on `listenHost`, with the
    /// endpoint's host (if any) resolved. `clock` gives the media time (µs) frames are stamped
    /// with. Throws `DatagramError`: `.addressInUse` when something else listens on the port,
    /// `.resolution` when the sender's name does not resolve.
    public init(configuration: Configuration, clock: @escaping @Sendable () -> UInt64) throws {
        self.configuration = configuration
        self.clock = clock
        loop = ExpressionSourceThread(name: "veil-face-\(configuration.endpoint.kind.rawValue)")
        let endpoint = configuration.endpoint
        expectedSenders = endpoint.host.isEmpty ? [] : Set(try DatagramAddress.resolve(host: endpoint.host, port: 0).map(Sender.init))
        do {
            socket = try DatagramSocket(bindingTo: configuration.listenHost, port: endpoint.port)
        } catch let error as DatagramError where error == .unreachable && configuration.listenHost.isEmpty {
            // A machine without IPv6: every IPv4 address instead.
            socket = try DatagramSocket(bindingTo: "0.0.0.0", port: endpoint.port)
        }
    }

    deinit { stop() }

    /// The protocol and the port listened on: `Live Link Face on port 11111`.
    public var sourceDescription: String { "\(configuration.endpoint.kind.displayName) on port \(localAddress.port)" }

    /// What came in and went out so far (updated after every wake-up of the loop).
    public var statistics: Statistics { shared.withLock { $0 } }

    /// Starts the loop on a thread of its own: each frame goes to `deliver`, on that thread, in
    /// order. `voiceMouth`: the jaw opening of the voice being sent, for the strict level's mouth
    /// (`ExpressionSender.voiceMouth`). Calls after the first do nothing.
    public func start(voiceMouth: @escaping @Sendable () -> Float? = { nil },
                      deliver: @escaping @Sendable (ExpressionFrame) -> Void) {
        loop.start { [self] in run(voiceMouth: voiceMouth, deliver: deliver) }
    }

    /// Stops the loop and waits for it to end (at most one wake-up, about 50 ms). Idempotent.
    /// `start` and `stop` are called from one thread, the one that owns the source.
    public func stop() { loop.stop() }

    /// The loop: wait, drain a batch, give out what is due; until `stop()`.
    private func run(voiceMouth: @Sendable () -> Float?, deliver: (ExpressionFrame) -> Void) {
        var receiverConfiguration = InteropFaceReceiver<Sender>.Configuration(kind: configuration.endpoint.kind,
                                                                             expectedSources: expectedSenders)
        receiverConfiguration.lostAfterMicros = configuration.lostAfterMicros
        receiverConfiguration.lostFrameIntervalMicros = configuration.lostFrameIntervalMicros
        receiverConfiguration.minimumFrameIntervalMicros = configuration.minimumFrameIntervalMicros
        var receiver = InteropFaceReceiver(receiverConfiguration, at: clock())
        var privacy = ExpressionPrivacy(level: configuration.privacy, seed: configuration.privacySeed)
        var sequence: UInt32 = 0
        // One buffer for every datagram: UDP's largest payload fits, so nothing real is cut.
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var socketFailureLogged = false
        let batchLimit = max(configuration.batchLimit, 1)
        while loop.isRunning {
            let now = clock()
            let due = receiver.nextFrameMicros
            // At most 50 ms asleep, so that `stop()` is seen soon.
            let wait = min(due > now ? Double(due - now) / 1e6 : 0, 0.05)
            do {
                if try socket.waitUntilReadable(timeout: wait) {
                    let arrival = clock()
                    for _ in 0..<batchLimit {
                        guard let reception = try socket.receive(into: &buffer) else { break }
                        // Decoded where it lies in the buffer: no copy per datagram.
                        let bytes = buffer[..<min(reception.count, buffer.count)]
                        for note in receiver.receive(bytes, truncated: reception.truncated, from: Sender(reception.source), at: arrival) {
                            configuration.log(note.description)
                        }
                    }
                }
            } catch {
                // Not expected of a bound UDP socket; said once, and the loop does not spin on it.
                if !socketFailureLogged {
                    socketFailureLogged = true
                    configuration.log("\(configuration.endpoint.kind.displayName): receiving failed: \(error)")
                }
                Thread.sleep(forTimeInterval: 0.01)
            }
            let time = clock()
            while let frame = receiver.frame(at: time) {
                switch frame {
                case .tracked(let update, let at):
                    let expression = privacy.apply(update.expression, at: Double(at) / 1e6, voiceMouth: voiceMouth())
                    deliver(ExpressionFrame(sequence: sequence, captureTimeMicros: at, state: .tracked, expression: expression))
                case .lost(let at):
                    deliver(ExpressionFrame(sequence: sequence, captureTimeMicros: at, state: .lost))
                }
                sequence &+= 1
            }
            let statistics = receiver.statistics
            shared.withLock { $0 = statistics }
        }
    }
}
