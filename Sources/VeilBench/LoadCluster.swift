import Dispatch
import Foundation
import Synchronization
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// The service as docs/deployment.md deploys it, on free loopback ports of this machine:
/// redis-server (no persistence), `veil serve` nodes sharing their rooms through it, and haproxy
/// in front of them running deploy/haproxy.cfg as it is. `stop()` ends them all, haproxy first.
final class LoadCluster {
    /// What the cluster needs from the machine, found before anything starts.
    struct Tools {
        var redisServer: URL
        var haproxy: URL
        /// deploy/haproxy.cfg of the checkout.
        var haproxyConfiguration: URL

        /// redis-server and haproxy on `$PATH` (or in /usr/sbin, where Debian puts haproxy) and
        /// deploy/haproxy.cfg, or why the cluster cannot run.
        static func find() -> Result<Tools, Unavailable> {
            guard let redis = ChildProcess.find("redis-server") else {
                return .failure(Unavailable(reason: "redis-server is not installed (scripts/bootstrap installs Debian's redis-server)"))
            }
            guard let haproxy = ChildProcess.find("haproxy") else {
                return .failure(Unavailable(reason: "haproxy is not installed (scripts/bootstrap installs Debian's haproxy)"))
            }
            guard let configuration = LoadCluster.checkoutFile("deploy/haproxy.cfg") else {
                return .failure(Unavailable(reason: "deploy/haproxy.cfg was not found above the working directory or this executable: "
                                            + "run the bench from Veil's checkout"))
            }
            return .success(Tools(redisServer: redis, haproxy: haproxy, haproxyConfiguration: configuration))
        }
    }

    /// Why the cluster cannot run on this machine.
    struct Unavailable: Error, CustomStringConvertible {
        var reason: String
        var description: String { reason }
    }

    let redis: ChildProcess
    let redisPort: Int
    let nodes: [ServeProcess]
    let balancer: ChildProcess
    let balancerPort: Int
    /// Where Redis keeps its (unused) working files; removed by `stop()`.
    private let directory: URL

    /// The balancer's WebSocket URL: where every client connects.
    var webSocketURL: URL { URL(string: "ws://127.0.0.1:\(balancerPort)/ws")! }

    private init(redis: ChildProcess, redisPort: Int, nodes: [ServeProcess], balancer: ChildProcess, balancerPort: Int, directory: URL) {
        self.redis = redis
        self.redisPort = redisPort
        self.nodes = nodes
        self.balancer = balancer
        self.balancerPort = balancerPort
        self.directory = directory
    }

    /// Starts Redis, `count` nodes of `executable` (`veil serve --redis … --node-id nodeN`, each
    /// with `secret`) and haproxy, and returns once haproxy has found the nodes up. What started
    /// is stopped again if a later step fails.
    static func start(_ tools: Tools, executable: URL, nodes count: Int, roomSize: Int, secret: ServerSecret) throws -> LoadCluster {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-bench-cluster-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var started: [() -> Void] = [{ try? FileManager.default.removeItem(at: directory) }]
        do {
            let redisPort = try freePort()
            let redis = try startRedis(tools.redisServer, port: redisPort, directory: directory)
            started.append { _ = redis.stop() }
            var nodes: [ServeProcess] = []
            for index in 1...count {
                let node = try ServeProcess.start(executable: executable, roomSize: roomSize, secret: secret,
                                                  arguments: ["--web", "none", "--redis", "127.0.0.1:\(redisPort)", "--node-id", "node\(index)"],
                                                  name: "node\(index)")
                started.append { _ = node.stop() }
                nodes.append(node)
            }
            let balancerPort = try freePort()
            let balancer = try startBalancer(tools, port: balancerPort, nodes: nodes)
            return LoadCluster(redis: redis, redisPort: redisPort, nodes: nodes, balancer: balancer, balancerPort: balancerPort,
                               directory: directory)
        } catch {
            for stop in started.reversed() { stop() }
            throw error
        }
    }

    /// redis-server on 127.0.0.1:`port` without persistence, once it says it is ready (10 s at most).
    private static func startRedis(_ executable: URL, port: Int, directory: URL) throws -> ChildProcess {
        let ready = DispatchSemaphore(value: 0)
        let output = Mutex("")
        let redis = try ChildProcess(
            name: "redis-server", executable: executable,
            arguments: ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory.path],
            directory: directory,
            line: { _, line in
                output.withLock { $0 = String(($0 + line + "\n").suffix(2000)) }
                if line.contains("Ready to accept connections") { ready.signal() }
            },
            ended: { ready.signal() })
        guard ready.wait(timeout: .now() + 10) == .success, redis.isRunning else {
            redis.stop()
            throw VeilError.io("redis-server did not start on 127.0.0.1:\(port): \(output.withLock { $0 })")
        }
        return redis
    }

    /// haproxy with deploy/haproxy.cfg on 127.0.0.1:`port` in front of `nodes`, once it has passed
    /// `/health` through to a node three times running and every node has had its first check.
    private static func startBalancer(_ tools: Tools, port: Int, nodes: [ServeProcess]) throws -> ChildProcess {
        var environment = ["VEIL_BIND": "127.0.0.1:\(port)"]
        for (index, node) in nodes.enumerated() { environment["VEIL_NODE\(index + 1)"] = "127.0.0.1:\(node.port)" }
        let output = Mutex("")
        let balancer = try ChildProcess(name: "haproxy", executable: tools.haproxy,
                                        arguments: ["-db", "-f", tools.haproxyConfiguration.path], environment: environment,
                                        line: { _, line in output.withLock { $0 = String(($0 + line + "\n").suffix(2000)) } })
        // haproxy offers nothing to wait on from another process: ask it every 200 ms.
        let deadline = Date().addingTimeInterval(20)
        var answered = 0
        while answered < 3, Date() < deadline, balancer.isRunning {
            if (try? HTTPProbe.get(port: port, path: "/health")) != nil { answered += 1 } else { answered = 0 }
            Thread.sleep(forTimeInterval: 0.2)
        }
        guard answered >= 3 else {
            balancer.stop()
            throw VeilError.io("haproxy did not come up on 127.0.0.1:\(port) with \(tools.haproxyConfiguration.path): \(output.withLock { $0 })")
        }
        // Health checks run every second (rise 1): wait one round so that every node is in.
        Thread.sleep(forTimeInterval: 1.2)
        return balancer
    }

    /// Ends haproxy, then the nodes, then Redis; how each ended, by name.
    func stop() -> [String: String] {
        var exits: [String: String] = [:]
        // SIGUSR1: haproxy's soft stop, which exits with status 0 once its connections are closed (they are by now).
        exits[balancer.name] = balancer.stop(signal: SIGUSR1)
        for (index, node) in nodes.enumerated() { exits["node\(index + 1)"] = node.stop() }
        exits[redis.name] = redis.stop()
        try? FileManager.default.removeItem(at: directory)
        return exits
    }

    /// A free TCP port on 127.0.0.1 (bound and released: nothing else on this machine takes it in between, usually).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw VeilError.io("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw VeilError.io("cannot bind a loopback port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// `path` in the nearest enclosing directory that has it: from the working directory, then from
    /// this executable, then from where this source file was built.
    static func checkoutFile(_ path: String) -> URL? {
        let starts = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true),
                      URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath().deletingLastPathComponent(),
                      URL(fileURLWithPath: #filePath).deletingLastPathComponent()]
        for start in starts {
            var directory = start.standardizedFileURL
            while true {
                let candidate = directory.appendingPathComponent(path)
                if FileManager.default.fileExists(atPath: candidate.path) { return candidate }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return nil
    }
}
