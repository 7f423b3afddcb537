import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on a loopback port in front of another, which a test cuts as a network partition
/// would: the tests put it between one `veil serve` node and Redis, the other nodes reaching
/// Redis directly, and cut that node alone.
///
/// One thread of its own moves the bytes: poll(2) over every socket, woken through a pipe when the
/// test changes the mode; the sockets are non-blocking, and bytes that one side has not taken yet
/// stop the relay reading from the other.
public final class TCPRelay: Sendable {
    /// What the relay does with connections.
    public enum Mode: Sendable, Equatable {
        /// Each connection is forwarded to the upstream port, both ways.
        case forwarding
        /// The link is reset: every connection is closed on both sides with a reset (RST), and new
        /// ones are refused (the relay's port is closed until it forwards again).
        case reset
        /// The link drops everything: connections stay open and carry nothing either way, new
        /// ones are accepted and carry nothing (never connected upstream).
        case blackHole
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The loopback port the relay listens on.
    public let port: Int
    /// The mode the test asked for, and whether the relay is stopping; the relay's thread reads it when woken.
    private let requested: Mutex<(mode: Mode, stopping: Bool)>
    /// Signalled by the relay's thread once it has applied a request.
    private let applied = DispatchSemaphore(value: 0)
    private let wake: (read: Int32, write: Int32)

    /// Starts relaying from a free loopback port to `127.0.0.1:upstreamPort`, forwarding.
    public init(upstreamPort: Int) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw Failure(description: "pipe() failed: \(String(cString: strerror(errno)))") }
        wake = (fds[0], fds[1])
        let listener: Int32
        do {
            listener = try Self.listen(port: 0)
        } catch {
            close(fds[0]); close(fds[1])
            throw error
        }
        port = Self.localPort(of: listener)
        requested = Mutex((.forwarding, false))
        let engine = Engine(listener: listener, port: port, upstreamPort: upstreamPort, wake: fds[0])
        let thread = Thread { [self] in
            engine.run(requests: { self.requested.withLock { $0 } }, applied: { self.applied.signal() })
        }
        thread.name = "tcp-relay-\(port)"
        thread.start()
    }

    /// Switches to `mode`, returning once the relay has applied it (existing connections reset or
    /// held, the port closed or open again). Going back to `forwarding` resets the connections
    /// held by a black hole (as TCP gives up on a link silent for long): only new ones are forwarded.
    public func set(_ mode: Mode) {
        let stopping = requested.withLock { state -> Bool in
            state.mode = mode
            return state.stopping
        }
        guard !stopping else { return }
        notify()
        applied.wait()
    }

    /// Closes every connection and the port, and ends the relay's thread (once; the relay is inert afterwards).
    public func stop() {
        let already = requested.withLock { state -> Bool in
            defer { state.stopping = true }
            return state.stopping
        }
        guard !already else { return }
        notify()
        applied.wait()
        close(wake.write)
    }

    private func notify() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    // MARK: Sockets

    /// A non-blocking socket listening on 127.0.0.1:`port` (0: a free one).
    fileprivate static func listen(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, Glibc.listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "cannot listen on 127.0.0.1:\(port): \(reason)")
        }
        setNonBlocking(fd)
        return fd
    }

    /// A non-blocking socket connected to 127.0.0.1:`port` (the connect itself blocks: loopback
    /// answers at once), or nil when nothing listens there.
    fileprivate static func connect(port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { close(fd); return nil }
        setNonBlocking(fd)
        return fd
    }

    /// Closes `fd` with a reset (RST) rather than an orderly end (FIN).
    fileprivate static func reset(_ fd: Int32) {
        var abort = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        close(fd)
    }

    fileprivate static func localPort(of fd: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    private static func setNonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }
}

/// The relay's sockets and what moves between them. Used by the relay's thread only, which is why
/// it can be handed to that thread (`@unchecked Sendable`) without a lock.
private final class Engine: @unchecked Sendable {
    /// One relayed connection: the client's socket, upstream's (nil while held by a black hole),
    /// and the bytes each has yet to be sent.
    final class Link {
        let client: Int32
        let upstream: Int32?
        var toClient: [UInt8] = []
        var toUpstream: [UInt8] = []
        var finished = false
        init(client: Int32, upstream: Int32?) { self.client = client; self.upstream = upstream }
    }

    private var listener: Int32?
    private let port: Int
    private let upstreamPort: Int
    private let wake: Int32
    private var mode = TCPRelay.Mode.forwarding
    private var links: [Link] = []
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    init(listener: Int32, port: Int, upstreamPort: Int, wake: Int32) {
        self.listener = listener; self.port = port; self.upstreamPort = upstreamPort; self.wake = wake
    }

    func run(requests: () -> (mode: TCPRelay.Mode, stopping: Bool), applied: () -> Void) {
        while true {
            var fds = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            if let listener { fds.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
            var watched: [(link: Link, toUpstream: Bool)] = []  // for each side after the first entries
            if mode == .forwarding {
                for link in links {
                    guard let upstream = link.upstream else { continue }
                    // Read a side only when the other has taken what came before; write while bytes wait.
                    fds.append(pollfd(fd: link.client, events: Int16(link.toUpstream.isEmpty ? POLLIN : 0) | Int16(link.toClient.isEmpty ? 0 : POLLOUT), revents: 0))
                    watched.append((link, true))
                    fds.append(pollfd(fd: upstream, events: Int16(link.toClient.isEmpty ? POLLIN : 0) | Int16(link.toUpstream.isEmpty ? 0 : POLLOUT), revents: 0))
                    watched.append((link, false))
                }
            }
            guard poll(&fds, nfds_t(fds.count), -1) >= 0 || errno == EINTR else { break }
            if fds[0].revents != 0 {
                var bytes = [UInt8](repeating: 0, count: 64)
                _ = read(wake, &bytes, bytes.count)
                let request = requests()
                if request.stopping {
                    shutDown()
                    applied()
                    return
                }
                apply(request.mode)
                applied()
                continue // the sockets polled above may be closed now
            }
            if fds.count > 1, fds[1].revents != 0, listener != nil { accept() }
            let first = fds.count - watched.count
            for (offset, side) in watched.enumerated() where fds[first + offset].revents != 0 {
                move(side.link, fromClient: side.toUpstream)
            }
            links.removeAll { link in
                guard link.finished else { return false }
                close(link.client)
                if let upstream = link.upstream { close(upstream) }
                return true
            }
        }
        shutDown()
        applied()
    }

    private func apply(_ newMode: TCPRelay.Mode) {
        defer { mode = newMode }
        switch newMode {
        case .reset:
            resetAll()
            if let listener { close(listener) }
            listener = nil
        case .blackHole:
            if listener == nil { listener = try? TCPRelay.listen(port: port) }
        case .forwarding:
            // Connections a black hole held are given up on; only new ones are forwarded.
            if mode == .blackHole { resetAll() }
            if listener == nil { listener = try? TCPRelay.listen(port: port) }
        }
    }

    private func accept() {
        guard let listener else { return }
        while true {
            let client = Glibc.accept(listener, nil, nil)
            guard client >= 0 else { return }
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            switch mode {
            case .forwarding:
                guard let upstream = TCPRelay.connect(port: upstreamPort) else { TCPRelay.reset(client); continue }
                links.append(Link(client: client, upstream: upstream))
            case .blackHole:
                links.append(Link(client: client, upstream: nil))
            case .reset:
                TCPRelay.reset(client)
            }
        }
    }

    /// Reads what the client (or upstream) sent and writes what waits for either side.
    private func move(_ link: Link, fromClient: Bool) {
        guard !link.finished, let upstream = link.upstream else { return }
        let (source, sink) = fromClient ? (link.client, upstream) : (upstream, link.client)
        let pendingEmpty = fromClient ? link.toUpstream.isEmpty : link.toClient.isEmpty
        if pendingEmpty {
            let count = recv(source, &buffer, buffer.count, 0)
            if count > 0 {
                if fromClient { link.toUpstream += buffer[..<count] } else { link.toClient += buffer[..<count] }
            } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                // One side ended or failed: the relay ends the other too.
                link.finished = true
                return
            }
        }
        for (fd, toUpstream) in [(sink, fromClient), (source, !fromClient)] {
            var pending = toUpstream ? link.toUpstream : link.toClient
            guard !pending.isEmpty else { continue }
            let sent = pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                pending.removeFirst(sent)
            } else if sent < 0, errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
                link.finished = true
            }
            if toUpstream { link.toUpstream = pending } else { link.toClient = pending }
        }
    }

    private func resetAll() {
        for link in links {
            TCPRelay.reset(link.client)
            if let upstream = link.upstream { TCPRelay.reset(upstream) }
        }
        links.removeAll()
    }

    private func shutDown() {
        resetAll()
        if let listener { close(listener) }
        listener = nil
        close(wake)
    }
}
