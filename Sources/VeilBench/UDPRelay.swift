import Foundation
import Synchronization
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// An in-process UDP relay that sits on the real path between two peers and adds one-way delay,
/// jitter and loss (the machines Veil is tested on have no netem). The call tests put it between
/// two Veil peers; the bench's `ChromiumAnchor` between two RTCPeerConnections in chromium.
///
/// It owns two UDP sockets on the host's non-loopback IPv4 address (libnice gathers no 127.0.0.1
/// candidates): one facing side `.a` (the offerer), one facing side `.b` (the answerer). Each peer is
/// told about only the socket facing it (`candidate(facing:)`), so everything it sends — ICE checks,
/// DTLS, SRTP, SCTP — arrives at the relay, which forwards each datagram to the other side from the
/// other socket after a delay and, with probability `loss`, drops it.
///
/// Each side's real address is taken from the first datagram that arrives on the socket facing it;
/// before that, `expect(_:at:port:)` (fed from the side's own real host candidate) tells the relay
/// where to send.
///
/// **Delay model.** Each datagram's one-way delay is drawn uniformly from
/// `[delay − jitter, delay + jitter]` (clamped at 0) by a SplitMix64 generator seeded per
/// direction. By default a direction is order-preserving: a datagram never leaves before the one
/// received before it in the same direction (its departure is pushed back to that one's), as on a
/// single path with queueing. With `reorders` set, each datagram keeps its own draw, so jitter
/// larger than the packet spacing reorders packets.
///
/// **Changing conditions.** `impairment` may be set at any time while the relay runs: each
/// datagram draws its loss and delay from the impairment in force when it arrives, so a schedule of
/// conditions can run through one relay and one call. Order preservation holds across a change:
/// after the delay drops, new datagrams wait behind those still held, so the queue drains as it
/// would on a real path.
///
/// One thread waits in `poll()` on both sockets and a wake-up pipe, with the timeout set to the
/// next due departure (a min-heap); it never spins. `close()` (or deinit) stops and joins it.
// @unchecked: the descriptors are immutable after `init`, and all mutable state is in `SharedBox`
// behind its one mutex (the relay thread and callers meet only there).
public final class UDPRelay: @unchecked Sendable {
    /// Which peer a socket faces.
    public enum Side: Sendable, CustomStringConvertible {
        case a, b
        /// The side across the relay.
        public var other: Side { self == .a ? .b : .a }
        public var description: String { self == .a ? "a" : "b" }
    }

    /// The impairment of each one-way path (the same both ways, independent draws).
    public struct Impairment: Sendable, Equatable, Codable {
        /// Mean one-way delay added, in milliseconds.
        public var delayMillis: Double
        /// Half-width of the uniform jitter around the delay, in milliseconds.
        public var jitterMillis: Double
        /// Probability that a datagram is dropped, 0...1.
        public var loss: Double
        /// Whether jitter may reorder datagrams (otherwise each direction is order-preserving).
        public var reorders: Bool

        /// A path with these figures; all zero is a clean path.
        public init(delayMillis: Double = 0, jitterMillis: Double = 0, loss: Double = 0, reorders: Bool = false) {
            self.delayMillis = delayMillis
            self.jitterMillis = jitterMillis
            self.loss = loss
            self.reorders = reorders
        }
    }

    /// What went through one direction.
    public struct Counts: Sendable {
        /// Datagrams received from the sending side, dropped as loss, and sent on.
        public var received = 0, dropped = 0, forwarded = 0
        /// Smallest and largest delay applied to a forwarded datagram (ms), and their sum.
        public var smallestDelayMillis = Double.infinity, largestDelayMillis = 0.0, totalDelayMillis = 0.0
        /// Datagrams that left before one received earlier (only with `reorders`).
        public var reordered = 0
        /// Mean delay applied, in milliseconds.
        public var meanDelayMillis: Double { forwarded == 0 ? .nan : totalDelayMillis / Double(forwarded) }

        /// Nothing yet.
        public init() {}
    }

    /// Failure to set the relay up.
    public struct SetupError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The host address both sockets are bound to.
    public let host: String
    /// The ports of the socket facing `.a` and the socket facing `.b`.
    public let portFacingA: UInt16, portFacingB: UInt16

    private let socketA: Int32, socketB: Int32
    private let wakeRead: Int32, wakeWrite: Int32
    private let shared: SharedBox
    private let finished = DispatchSemaphore(value: 0)
    private let closed = Mutex(false)

    /// Holds the shared state, so that the relay thread can keep it without keeping the relay.
    private final class SharedBox: Sendable {
        let mutex: Mutex<Shared>
        init(_ shared: Shared) { mutex = Mutex(shared) }
        func withLock<Result>(_ body: (inout Shared) -> Result) -> Result { mutex.withLock { body(&$0) } }
    }

    /// Mutable state shared between the relay thread and its users.
    private struct Shared {
        var impairment: Impairment
        var stopping = false
        /// Where each side really is (`.a` is the offerer).
        var addressOfA: sockaddr_in?, addressOfB: sockaddr_in?
        /// Whether the address was learned from a datagram (then candidates no longer change it).
        var learnedA = false, learnedB = false
        var randomAB: SplitMix64, randomBA: SplitMix64
        var countsAB = Counts(), countsBA = Counts()
    }

    /// Binds the two sockets on `host` and starts the relay thread. `seed` makes the loss and delay
    /// draws repeatable.
    public init(host: String, impairment: Impairment = Impairment(), seed: UInt64) throws {
        self.host = host
        func bound() throws -> (Int32, UInt16) {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw SetupError(description: "socket(): errno \(errno)") }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
                Glibc.close(fd)
                throw SetupError(description: "\(host) is not an IPv4 address")
            }
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard result == 0, named == 0 else {
                Glibc.close(fd)
                throw SetupError(description: "binding a UDP socket on \(host): errno \(errno)")
            }
            // Room for a burst of delayed media in both directions.
            var size: Int32 = 1 << 20
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            return (fd, UInt16(bigEndian: address.sin_port))
        }
        let (a, portA) = try bound()
        let b: Int32, portB: UInt16
        do { (b, portB) = try bound() } catch { Glibc.close(a); throw error }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0, fcntl(pipeEnds[0], F_SETFL, O_NONBLOCK) == 0, fcntl(pipeEnds[1], F_SETFL, O_NONBLOCK) == 0 else {
            Glibc.close(a); Glibc.close(b)
            throw SetupError(description: "pipe2(): errno \(errno)")
        }
        socketA = a; socketB = b; portFacingA = portA; portFacingB = portB
        wakeRead = pipeEnds[0]; wakeWrite = pipeEnds[1]
        shared = SharedBox(Shared(impairment: impairment, randomAB: SplitMix64(seed: seed), randomBA: SplitMix64(seed: seed ^ 0x5EED_BA)))

        let thread = Thread { [socketA, socketB, wakeRead, shared, finished] in
            Self.run(socketA: socketA, socketB: socketB, wake: wakeRead, shared: shared)
            finished.signal()
        }
        thread.name = "veil-udp-relay"
        thread.start()
    }

    deinit { close() }

    /// This machine's first IPv4 address that is up and not loopback, where the relay should bind:
    /// libnice and chromium gather no 127.0.0.1 candidates. Nil when there is none.
    public static func hostAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
                  entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0, entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(address, socklen_t(MemoryLayout<sockaddr_in>.size), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            return String(cString: host)
        }
        return nil
    }

    /// The only candidate the peer on `side` is given for the other: the relay socket facing it.
    public func candidate(facing side: Side) -> String {
        "candidate:1 1 UDP 2130706431 \(host) \(side == .a ? portFacingA : portFacingB) typ host"
    }

    /// Where `side` can be reached until a datagram from it shows its address. Ignored once learned
    /// or set.
    public func expect(_ side: Side, at address: String, port: UInt16) {
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        guard inet_pton(AF_INET, address, &socketAddress.sin_addr) == 1 else { return }
        shared.withLock { state in
            switch side {
            case .a: if state.addressOfA == nil { state.addressOfA = socketAddress }
            case .b: if state.addressOfB == nil { state.addressOfB = socketAddress }
            }
        }
    }

    /// Reads `expect(_:at:port:)`'s arguments from a real ICE candidate of `side` if it is an IPv4
    /// UDP host candidate (`candidate:<f> <c> UDP <prio> <addr> <port> typ host`); otherwise ignores it.
    /// Returns whether it was one.
    @discardableResult
    public func expect(_ side: Side, fromCandidate candidate: String) -> Bool {
        let fields = candidate.split(separator: " ")
        guard fields.count >= 8, fields[2].uppercased() == "UDP", fields[6] == "typ", fields[7] == "host",
              let port = UInt16(fields[5]), fields[4].contains("."), !fields[4].contains(":") else { return false }
        expect(side, at: String(fields[4]), port: port)
        return true
    }

    /// The impairment in force; setting it changes it for the datagrams received from now on
    /// (also while a call runs through the relay).
    public var impairment: Impairment {
        get { shared.withLock { $0.impairment } }
        set { shared.withLock { $0.impairment = newValue } }
    }

    /// What went a → b (offerer to answerer) and b → a so far.
    public var counts: (aToB: Counts, bToA: Counts) {
        shared.withLock { ($0.countsAB, $0.countsBA) }
    }

    /// Whether the relay has heard from each side.
    public var learned: (a: Bool, b: Bool) {
        shared.withLock { ($0.learnedA, $0.learnedB) }
    }

    /// Stops the relay thread, waits for it and closes the sockets. Datagrams still held are
    /// dropped. Safe to call more than once.
    public func close() {
        let first = closed.withLock { wasClosed -> Bool in
            defer { wasClosed = true }
            return !wasClosed
        }
        guard first else { return }
        shared.withLock { $0.stopping = true }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        finished.wait()
        for fd in [socketA, socketB, wakeRead, wakeWrite] { Glibc.close(fd) }
    }

    // MARK: - The relay thread

    /// A datagram waiting for its departure.
    private struct Pending {
        var due: UInt64
        /// Order of arrival, to break ties and keep equal departures in order.
        var serial: UInt64
        var towards: Side
        var payload: [UInt8]
        var delayMillis: Double
    }

    /// A binary min-heap of pending datagrams by departure time.
    private struct DepartureHeap {
        private var items: [Pending] = []
        var first: Pending? { items.first }
        var isEmpty: Bool { items.isEmpty }

        private func before(_ i: Int, _ j: Int) -> Bool {
            items[i].due != items[j].due ? items[i].due < items[j].due : items[i].serial < items[j].serial
        }

        mutating func push(_ item: Pending) {
            items.append(item)
            var child = items.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard before(child, parent) else { break }
                items.swapAt(child, parent)
                child = parent
            }
        }

        mutating func pop() -> Pending? {
            guard !items.isEmpty else { return nil }
            items.swapAt(0, items.count - 1)
            let top = items.removeLast()
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < items.count, before(left, smallest) { smallest = left }
                if right < items.count, before(right, smallest) { smallest = right }
                guard smallest != parent else { break }
                items.swapAt(parent, smallest)
                parent = smallest
            }
            return top
        }
    }

    /// Monotonic time in microseconds.
    private static func nowMicros() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000 + UInt64(time.tv_nsec) / 1_000
    }

    /// The relay loop: receive, schedule, send when due, until `stopping`.
    private static func run(socketA: Int32, socketB: Int32, wake: Int32, shared: SharedBox) {
        var heap = DepartureHeap()
        var serial: UInt64 = 0
        // The latest departure scheduled per direction (for order preservation) and the serial of
        // the last datagram sent per direction (to count reordering).
        var lastDueTowardsB: UInt64 = 0, lastDueTowardsA: UInt64 = 0
        var lastSentSerialTowardsB: UInt64 = 0, lastSentSerialTowardsA: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var descriptors = [pollfd(fd: socketA, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: socketB, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        while !shared.withLock({ $0.stopping }) {
            // Send everything due.
            var now = nowMicros()
            while let next = heap.first, next.due <= now, let item = heap.pop() {
                let destination = shared.withLock { item.towards == .a ? $0.addressOfA : $0.addressOfB }
                guard var address = destination else { continue }
                let fd = item.towards == .a ? socketA : socketB
                let sent = item.payload.withUnsafeBytes { bytes in
                    withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                }
                let outOfOrder: Bool
                if item.towards == .b {
                    outOfOrder = item.serial < lastSentSerialTowardsB
                    lastSentSerialTowardsB = max(lastSentSerialTowardsB, item.serial)
                } else {
                    outOfOrder = item.serial < lastSentSerialTowardsA
                    lastSentSerialTowardsA = max(lastSentSerialTowardsA, item.serial)
                }
                guard sent >= 0 else { continue }
                shared.withLock { state in
                    func note(_ counts: inout Counts) {
                        counts.forwarded += 1
                        counts.totalDelayMillis += item.delayMillis
                        counts.smallestDelayMillis = min(counts.smallestDelayMillis, item.delayMillis)
                        counts.largestDelayMillis = max(counts.largestDelayMillis, item.delayMillis)
                        if outOfOrder { counts.reordered += 1 }
                    }
                    if item.towards == .b { note(&state.countsAB) } else { note(&state.countsBA) }
                }
                now = nowMicros()
            }

            // Wait for a datagram, a wake-up or the next departure.
            let timeout: Int32
            if let next = heap.first {
                timeout = Int32(min((next.due > now ? next.due - now : 0) + 999, 1_000_000) / 1_000)
            } else {
                timeout = 1_000
            }
            for index in descriptors.indices { descriptors[index].revents = 0 }
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            guard ready > 0 else { continue }
            if descriptors[2].revents != 0 {
                var drained: UInt8 = 0
                while read(wake, &drained, 1) > 0 {}
            }
            for (index, from) in [(0, Side.a), (1, Side.b)] where descriptors[index].revents & Int16(POLLIN) != 0 {
                let fd = from == .a ? socketA : socketB
                // Read everything waiting on this socket.
                while true {
                    var source = sockaddr_in()
                    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                    let count = buffer.withUnsafeMutableBytes { bytes in
                        withUnsafeMutablePointer(to: &source) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                                recvfrom(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, &length)
                            }
                        }
                    }
                    guard count >= 0 else { break }
                    let arrival = nowMicros()
                    serial += 1
                    // Learn the sender's address, draw loss and delay.
                    let decision: (drop: Bool, delayMicros: UInt64, reorders: Bool) = shared.withLock { state in
                        switch from {
                        case .a:
                            if !state.learnedA { state.addressOfA = source; state.learnedA = true }
                            state.countsAB.received += 1
                        case .b:
                            if !state.learnedB { state.addressOfB = source; state.learnedB = true }
                            state.countsBA.received += 1
                        }
                        let impairment = state.impairment
                        func draw(_ random: inout SplitMix64) -> (Bool, UInt64) {
                            let lossDraw = Double(random.next() >> 11) / Double(1 << 53)
                            let jitterDraw = Double(random.next() >> 11) / Double(1 << 53) * 2 - 1
                            let millis = max(0, impairment.delayMillis + impairment.jitterMillis * jitterDraw)
                            return (lossDraw < impairment.loss, UInt64(millis * 1_000))
                        }
                        let (drop, delay) = from == .a ? draw(&state.randomAB) : draw(&state.randomBA)
                        if drop {
                            if from == .a { state.countsAB.dropped += 1 } else { state.countsBA.dropped += 1 }
                        }
                        return (drop, delay, impairment.reorders)
                    }
                    guard !decision.drop else { continue }
                    var due = arrival + decision.delayMicros
                    let towards = from.other
                    if !decision.reorders {
                        due = max(due, towards == .b ? lastDueTowardsB : lastDueTowardsA)
                    }
                    if towards == .b { lastDueTowardsB = max(lastDueTowardsB, due) } else { lastDueTowardsA = max(lastDueTowardsA, due) }
                    heap.push(Pending(due: due, serial: serial, towards: towards, payload: Array(buffer[0..<count]),
                                      delayMillis: Double(due - arrival) / 1_000))
                }
            }
        }
    }
}
