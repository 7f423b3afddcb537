/// A UDP socket, owned: `init` opens it, `deinit` closes it (and a failing `init` closes what it
/// opened). Never blocks: a datagram that does not fit the send buffer is not sent
/// (`SendOutcome.wouldBlock`) and the caller goes on; receiving waits only as long as asked.
///
/// `@unchecked Sendable`: its only state is the descriptor, fixed from `init` to `deinit`, and the
/// kernel orders calls on it; one thread may send while another receives.
public final class DatagramSocket: @unchecked Sendable {
    private let descriptor: Int32
    /// Where `send` goes, for a socket opened with `init(connectingTo:port:)`.
    public let peer: DatagramAddress?
    /// The local address and port (the port the system chose when bound to port 0).
    public let localAddress: DatagramAddress

    /// What became of one datagram given to `send`.
    public enum SendOutcome: Hashable, Sendable {
        /// Handed to the network.
        case sent
        /// The send buffer was full: dropped, so that the caller never waits.
        case wouldBlock
        /// The peer answered an earlier datagram with "port unreachable" (nothing listens there):
        /// this one was dropped; later ones are sent again.
        case refused
    }

    /// A socket that sends to `host` at `port` (and receives only from there). Tries the host's
    /// addresses in order and keeps the first this machine can reach (an IPv6 address where IPv6
    /// is off is skipped). Throws `DatagramError`: `.resolution` for a host that does not resolve,
    /// `.unreachable` when no address can be reached.
    public init(connectingTo host: String, port: UInt16) throws {
        var firstError: DatagramError?
        var connected: (descriptor: Int32, peer: DatagramAddress, local: DatagramAddress)?
        for address in try DatagramAddress.resolve(host: host, port: port) {
            var descriptor: Int32 = -1
            do {
                descriptor = try System.openSocket(for: address.socketAddress)
                try System.connect(descriptor, to: address.socketAddress)
                connected = (descriptor, address, DatagramAddress(socketAddress: try System.localAddress(of: descriptor)))
                break
            } catch {
                if descriptor >= 0 { System.close(descriptor) }
                firstError = firstError ?? error as? DatagramError
            }
        }
        guard let connected else {
            throw DatagramError.unreachable.detailed("cannot reach \(host) port \(port)\(firstError.map { ": \($0.detail)" } ?? "")")
        }
        descriptor = connected.descriptor
        peer = connected.peer
        localAddress = connected.local
    }

    /// A socket bound to `host` (a local address; empty for every local address) at `port` (0 for
    /// one the system chooses: see `localAddress`), receiving from anyone.
    public init(bindingTo host: String = "127.0.0.1", port: UInt16 = 0) throws {
        let addresses = try System.resolve(host: DatagramAddress.unbracketed(host), port: port, passive: true)
        // For every local address, IPv6's any-address also takes IPv4 (IPV6_V6ONLY is cleared).
        let address = host.isEmpty ? addresses.first(where: System.isIPv6) ?? addresses[0] : addresses[0]
        let descriptor = try System.openSocket(for: address)
        do {
            try System.bind(descriptor, to: address)
            localAddress = DatagramAddress(socketAddress: try System.localAddress(of: descriptor))
        } catch {
            System.close(descriptor)
            throw error
        }
        self.descriptor = descriptor
        peer = nil
    }

    deinit { System.close(descriptor) }

    /// Sends `bytes` as one datagram, without waiting. Throws `DatagramError` for what a retry
    /// would not mend (`.tooLarge`, `.unreachable`, `.system`); a full buffer and a refusal are
    /// outcomes, not errors.
    @discardableResult
    public func send(_ bytes: [UInt8]) throws -> SendOutcome {
        do {
            try System.send(descriptor, bytes)
            return .sent
        } catch let error as DatagramError where error == .wouldBlock {
            return .wouldBlock
        } catch let error as DatagramError where error == .refused {
            return .refused
        }
    }

    /// One datagram received: its bytes and who sent it.
    public struct Datagram: Equatable, Sendable {
        /// The payload (at most the receive's `maximumBytes`).
        public var bytes: [UInt8]
        /// Who sent it.
        public var source: DatagramAddress
        /// True when the datagram was longer than the receive's `maximumBytes` and was cut.
        public var truncated: Bool
    }

    /// The next datagram, waiting at most `timeout` seconds (0: not at all); nil when none came.
    /// A datagram longer than `maximumBytes` comes cut, marked `truncated`. Blocks the calling
    /// thread: call it from a thread of its own, not from Swift's cooperative pool.
    public func receive(timeout: Double, maximumBytes: Int = 65_536) throws -> Datagram? {
        var buffer = [UInt8](repeating: 0, count: max(maximumBytes, 1))
        while try waitUntilReadable(timeout: timeout) {
            guard let reception = try receive(into: &buffer) else { continue }  // readable, then taken: wait again
            return Datagram(bytes: Array(buffer.prefix(min(reception.count, buffer.count))), source: reception.source,
                            truncated: reception.truncated)
        }
        return nil
    }

    /// One datagram read by `receive(into:)`: the first `min(count, buffer.count)` bytes of the
    /// buffer hold it.
    public struct Reception: Equatable, Sendable {
        /// The datagram's length as sent (more than the buffer's when it was cut).
        public var count: Int
        /// Who sent it.
        public var source: DatagramAddress
        /// True when the datagram was longer than the buffer and was cut.
        public var truncated: Bool
    }

    /// Reads the next datagram already queued into `buffer` (its whole length is the capacity; a
    /// longer datagram is cut and marked), without waiting and without allocating a payload: a
    /// loop that drains the socket with one buffer holds one buffer's worth of memory however
    /// much arrives. Nil when nothing is queued.
    public func receive(into buffer: inout [UInt8]) throws -> Reception? {
        while true {
            do {
                let (count, from) = try buffer.withUnsafeMutableBytes { try System.receive(descriptor, into: $0) }
                return Reception(count: count, source: DatagramAddress(socketAddress: from), truncated: count > buffer.count)
            } catch let error as DatagramError where error == .wouldBlock {
                return nil
            } catch let error as DatagramError where error == .refused {
                continue  // an ICMP error for what this socket sent; not a datagram
            }
        }
    }

    /// Waits at most `timeout` seconds (0: not at all; infinity: for ever) until a datagram is
    /// queued; false when none came in time. Blocks the calling thread, as `receive(timeout:)`.
    public func waitUntilReadable(timeout: Double) throws -> Bool {
        let milliseconds = timeout.isFinite ? Int32((min(max(timeout, 0), 86_400) * 1000).rounded(.up)) : -1
        return try System.waitReadable(descriptor, milliseconds: milliseconds)
    }
}
