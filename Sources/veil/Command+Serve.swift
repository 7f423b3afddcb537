import Dispatch
import Foundation
import VeilCore
import VeilServer
import VeilConsole
#if canImport(Glibc)
import Glibc
#endif

let serveCommand = Command(name: "serve", help: """
USAGE: veil serve [options]

Runs the room server: WebSocket signaling at /ws (docs/protocol.md), GET /health, GET /metrics
(Prometheus' text format), and the browser client at / (docs/browser.md: open http://HOST:PORT/
in a browser to join a call). With --tls-cert and --tls-key all of it is served over TLS:
https:// and wss:// (docs/deployment.md).
Clients join a room with a token from `veil token`; the server relays their WebRTC offers, answers
and ICE candidates, and tells everyone who joins, leaves, drops out (reported after 3–5 s) and
mutes. Prints one line per join and leave on stdout (never a token, a secret or an address;
--log-format json for one JSON object per line). Stop with Ctrl-C or SIGTERM:
the server stops accepting, tells its clients to reconnect (`server_shutdown`) and exits; with
--redis their seats are held for 3 s, so clients reconnecting through a balancer resume on
another node (a rolling restart, docs/deployment.md).

OPTIONS:
  --host ADDRESS       IP address to listen on (default 127.0.0.1, this machine only;
                       0.0.0.0 or :: for every interface: serve TLS then, see --tls-cert)
  --port PORT          TCP port (default \(RoomServer.defaultPort); 0 picks a free one and prints it)
  --room-size N        Most participants per room, 2…32 (default 8): rooms are WebRTC meshes
  --secret-file PATH   The token signing secret (default \(ServerSecret.defaultFile().path)),
                       created with mode 0600 if absent. Without this option $VEIL_SECRET
                       (hex or base64, ≥ 32 bytes) takes precedence over the default file.
  --max-connections N  Most WebSocket connections at once (default 4096, lowered to fit the
                       open-file limit); beyond it clients get `server_full`. Half of them at
                       most may be waiting to join (beyond that, the one waiting longest makes
                       room for a newcomer). Rate limits: docs/protocol.md
  --ice-server URL     A STUN/TURN server handed to clients in `joined` (comma-separated for
                       several): stun:HOST:PORT, or turn:USER:PASSWORD@HOST:PORT for a TURN server
                       with a static user (every client gets that user)
  --web DIR            The browser client's directory, served at / (default: $VEIL_WEB, else the
                       checkout's web/ found from here or from the executable); `none` serves only
                       /health and /ws. Browsers need HTTPS for the microphone anywhere but
                       localhost: see docs/browser.md
  --tls-cert FILE      Serve https:// and wss:// with this certificate (PEM: the server's
                       certificate first, then any intermediates; its names must include the
                       host name clients connect to)
  --tls-key FILE       The certificate's private key (PEM, unencrypted). Both files are checked
                       before the server listens: missing, unreadable, not PEM, or a key that is
                       not the certificate's ends `veil serve` with a message (exit 1)
  --redis HOST:PORT    Share rooms with the other nodes using this Redis (several `veil serve`
                       behind one address, e.g. haproxy: docs/deployment.md). Participants of one
                       room may be on different nodes; the room size holds across them; a node
                       that stops answering for 3 s has its participants leave their rooms
                       (`timeout`). Every node needs the same secret. Redis must answer at start;
                       while it cannot be reached, joins are refused (`service_unavailable`)
  --node-id NAME       This node's name among the nodes sharing the Redis (A–Z a–z 0–9 . _ - @ + ~;
                       default: the host name and process id). Two live nodes cannot share a name
  --log-format FORMAT  text (default: a timestamp, the event and key=value words) or json (one
                       object per line, for a log collector; the start-up notes on stderr too)
""", run: runServe)

let tokenCommand = Command(name: "token", help: """
USAGE: veil token --room ROOM --user USER [--ttl 10m] [--secret-file PATH]

Prints a token that admits USER to ROOM until it expires: HMAC-SHA256 over the room, the user and
the expiry, signed with the server's secret (the same one `veil serve` uses). Only the server's
operator can make tokens; hand each participant their own over a private channel.

OPTIONS:
  --room ROOM          The room (1–64 characters of A–Z a–z 0–9 . _ - @ + ~)
  --user USER          The user (same characters)
  --ttl DURATION       Lifetime: 90s, 10m (default), 2h, 1d; at most 30d
  --secret-file PATH   The secret (default \(ServerSecret.defaultFile().path); $VEIL_SECRET takes
                       precedence when this option is absent)
""", run: runToken)

/// The secret for `serve` and `token`: an explicit --secret-file wins, then $VEIL_SECRET, then the default file.
func loadSecret(_ args: Arguments, createIfMissing: Bool) throws -> (ServerSecret, ServerSecret.Source) {
    var environment = ProcessInfo.processInfo.environment
    let file = args.value("secret-file").map { URL(fileURLWithPath: $0) }
    if file != nil { environment[ServerSecret.environmentVariable] = nil }
    return try ServerSecret.load(environment: environment, file: file, createIfMissing: createIfMissing)
}

func runServe(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["host", "port", "room-size", "secret-file", "ice-server", "max-connections", "web",
                                            "tls-cert", "tls-key", "redis", "node-id", "log-format"], booleans: [])
    guard args.positionals.isEmpty else { throw UsageError("serve takes no positional arguments") }
    let port = try args.int("port", default: RoomServer.defaultPort, range: 0...65535)
    let roomSize = try args.int("room-size", default: 8, range: 2...32)
    let maximumConnections = try args.int("max-connections", default: 4096, range: 2...1_000_000)
    let host = args.value("host") ?? "127.0.0.1"
    let iceServers = try (args.value("ice-server") ?? "").split(separator: ",").map { try iceServer(String($0)) }
    let (secret, source) = try loadSecret(args, createIfMissing: true)
    let web = try webDirectory(option: args.value("web"))
    let tls = try serverCertificate(certificate: args.value("tls-cert"), key: args.value("tls-key"))
    let redis = try redisBroker(address: args.value("redis"), node: args.value("node-id"))
    let format = try logFormat(args.value("log-format"))
    // The notes about the server itself go to stderr, in the log's format.
    let say: (String) -> Void = { message in
        switch format {
        case .text: Terminal.note(message)
        case .json: FileHandle.standardError.write(Data((LogFormat.json.note(message) + "\n").utf8))
        }
    }
    // One descriptor per client: the usual soft limit of 1024 would refuse clients long before the CPU is busy.
    let files = OpenFileLimit.raiseToHard()
    if let problem = files.problem { say("veil serve: open-file limit \(files.soft): \(problem)") }

    // Ctrl-C and SIGTERM are caught from before the server starts: whoever starts `veil serve` and
    // stops it as soon as it says it listens must not find the signal ignored on the way in.
    let stop = DispatchSemaphore(value: 0)
    let sources = catchStopSignals { stop.signal() }

    let server = RoomServer(configuration: .init(secret: secret, host: host, port: port,
                                                 rooms: .init(maximumParticipants: roomSize, iceServers: iceServers,
                                                              maximumConnections: maximumConnections),
                                                 webRoot: web.directory, tls: tls, redis: redis))
    // Log lines go to stdout as they happen, from a task that ends with the event stream.
    let logged = DispatchSemaphore(value: 0)
    Task.detached {
        for await event in server.events { FileHandle.standardOutput.write(Data((event.line(format) + "\n").utf8)) }
        logged.signal()
    }
    let url = try server.start()
    say("veil serve: secret from \(source)")
    if let redis { say("veil serve: node \(redis.node), sharing rooms through Redis at \(redis.host):\(redis.port)") }
    if let tls {
        say("veil serve: TLS with the certificate for \(tls.subject)"
                      + (tls.notAfter.map { ", valid until \(ISO8601DateFormatter().string(from: $0))" } ?? ""))
        if tls.hasExpired() { say("veil serve: this certificate has EXPIRED: clients will refuse it; renew it") }
    } else if host == "0.0.0.0" || host == "::" {
        say("veil serve: listening on every interface, port \(server.port ?? port); signaling is not encrypted (ws://)")
    }
    let taken = server.status().maximumConnections
    if taken < maximumConnections {
        say("veil serve: at most \(taken) connections (the open-file limit is \(files.soft)); raise it with ulimit -n for more")
    }
    say("veil serve: clients connect to \(url.absoluteString); health at \(server.healthURL?.absoluteString ?? "/health"), metrics at \(server.metricsURL?.absoluteString ?? "/metrics"). Ctrl-C stops.")
    if let directory = web.directory {
        say("veil serve: browser client at \(server.pageURL?.absoluteString ?? "/") (from \(directory.path))")
    } else if let problem = web.problem {
        say("veil serve: no browser client: \(problem); signaling works as usual")
    }

    stop.wait()
    say("veil serve: stopping")
    server.stop()
    _ = logged.wait(timeout: .now() + 2)
    sources.forEach { $0.cancel() }
}

/// `--log-format text|json` (default text).
func logFormat(_ option: String?) throws -> LogFormat {
    guard let option else { return .text }
    guard let format = LogFormat(rawValue: option) else {
        throw UsageError("--log-format must be \(LogFormat.allCases.map(\.rawValue).joined(separator: " or ")), not \(option)")
    }
    return format
}

/// `--redis HOST:PORT` and `--node-id NAME` (which needs `--redis`).
func redisBroker(address: String?, node: String?) throws -> RedisBrokerConfiguration? {
    guard let address else {
        if node != nil { throw UsageError("--node-id names this node among those sharing a Redis: give --redis HOST:PORT too") }
        return nil
    }
    // HOST:PORT, with an IPv6 address in brackets: [::1]:6379.
    var host = Substring(address), port = Substring("")
    if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
        port = host[host.index(after: close)...]
        host = host[host.index(after: host.startIndex)..<close]
        guard port.hasPrefix(":") else { throw UsageError("--redis must be HOST:PORT (e.g. 127.0.0.1:6379 or [::1]:6379), not \(address)") }
        port = port.dropFirst()
    } else if let colon = host.lastIndex(of: ":") {
        port = host[host.index(after: colon)...]
        host = host[..<colon]
    }
    guard !host.isEmpty, !host.contains(":") || address.hasPrefix("["), let number = Int(port), (1...65535).contains(number) else {
        throw UsageError("--redis must be HOST:PORT (e.g. 127.0.0.1:6379 or [::1]:6379), not \(address)")
    }
    let name = node ?? defaultNodeName()
    guard SignalingMessage.isValidName(name) else {
        throw UsageError("--node-id must be 1–\(SignalingMessage.maxNameLength) characters of A–Z a–z 0–9 . _ - @ + ~, not \"\(name)\"")
    }
    return RedisBrokerConfiguration(host: String(host), port: number, node: name)
}

/// The host name and the process id: unique among the nodes of one machine, and readable in logs.
func defaultNodeName() -> String {
    let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "node"
    let safe = String(host.unicodeScalars.filter { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_".unicodeScalars.contains($0)) }.prefix(48))
    return (safe.isEmpty ? "node" : safe) + "-\(ProcessInfo.processInfo.processIdentifier)"
}

/// `--tls-cert` and `--tls-key`: both or neither; read and checked before the server listens.
func serverCertificate(certificate: String?, key: String?) throws -> ServerCertificate? {
    switch (certificate, key) {
    case (nil, nil): return nil
    case (.some, nil): throw UsageError("--tls-cert needs --tls-key FILE, the certificate's private key")
    case (nil, .some): throw UsageError("--tls-key needs --tls-cert FILE, the certificate it belongs to")
    case let (certificate?, key?):
        return try ServerCertificate(certificateFile: URL(fileURLWithPath: certificate), keyFile: URL(fileURLWithPath: key))
    }
}

/// The directory `veil serve` serves at `/`: `--web DIR` (`none`: nothing), else `$VEIL_WEB`, else
/// a `web/` folder with an `index.html` in the nearest enclosing directory of the working
/// directory, then of the executable (the checkout it was built in). When none is found the
/// server still runs, and `problem` says why there is no page.
func webDirectory(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
    throws -> (directory: URL?, problem: String?) {
    let fm = FileManager.default
    func hasPage(_ url: URL) -> Bool { fm.fileExists(atPath: url.appendingPathComponent("index.html").path) }
    if let option {
        if option == "none" { return (nil, "--web none") }
        let url = URL(fileURLWithPath: option, isDirectory: true)
        guard hasPage(url) else { throw UsageError("--web \(option): no index.html there; give the checkout's web/ directory, or none") }
        return (url, nil)
    }
    if let value = environment["VEIL_WEB"], !value.isEmpty {
        let url = URL(fileURLWithPath: value, isDirectory: true)
        guard hasPage(url) else { return (nil, "VEIL_WEB=\(value) has no index.html") }
        return (url, nil)
    }
    let starts = [URL(fileURLWithPath: fm.currentDirectoryPath, isDirectory: true),
                  URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath().deletingLastPathComponent()]
    for start in starts {
        var directory = start.standardizedFileURL
        while true {
            let candidate = directory.appendingPathComponent("web", isDirectory: true)
            if hasPage(candidate) { return (candidate, nil) }
            let parent = directory.deletingLastPathComponent()
            if parent.path == directory.path { break }
            directory = parent
        }
    }
    return (nil, "no web/ directory with index.html found from here or from the veil executable; give one with --web DIR or VEIL_WEB")
}

func runToken(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["room", "user", "ttl", "secret-file"], booleans: [])
    guard args.positionals.isEmpty else { throw UsageError("token takes no positional arguments") }
    guard let room = args.value("room") else { throw UsageError("token needs --room ROOM") }
    guard let user = args.value("user") else { throw UsageError("token needs --user USER") }
    for (option, name) in [("room", room), ("user", user)] where !SignalingMessage.isValidName(name) {
        throw UsageError("--\(option) must be 1–\(SignalingMessage.maxNameLength) characters of A–Z a–z 0–9 . _ - @ + ~, not \"\(name)\"")
    }
    let ttl = try parseDuration(args.value("ttl") ?? "10m", option: "ttl")
    let (secret, _) = try loadSecret(args, createIfMissing: false)
    let token = try TokenAuthority(secret: secret).issue(room: room, user: user, lifetime: ttl)
    print(token)
}

/// `90`, `90s`, `10m`, `2h`, `1d` → seconds (1 s … 30 days).
func parseDuration(_ text: String, option: String) throws -> TimeInterval {
    let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
    var digits = Substring(text)
    var unit: TimeInterval = 1
    if let last = text.last, let scale = units[last] { unit = scale; digits = digits.dropLast() }
    guard let value = Int(digits), value > 0, TimeInterval(value) * unit <= TokenAuthority.maxLifetime else {
        throw UsageError("--\(option) must be a duration such as 90s, 10m, 2h or 1d, at most 30d; not \(text)")
    }
    return TimeInterval(value) * unit
}

/// One `--ice-server` entry: `stun:HOST:PORT`, `turn:HOST:PORT`, or with a TURN user
/// `turn:USER:PASSWORD@HOST:PORT` (user and password go into the entry's own fields, as WebRTC's
/// RTCIceServer has them).
func iceServer(_ text: String) throws -> ICEServer {
    guard let colon = text.firstIndex(of: ":"), ["stun", "stuns", "turn", "turns"].contains(text[..<colon].lowercased()) else {
        throw UsageError("--ice-server must be a stun:, stuns:, turn: or turns: URL, not \(text)")
    }
    let scheme = text[..<colon]
    var rest = text[text.index(after: colon)...]
    if rest.hasPrefix("//") { rest = rest.dropFirst(2) }
    guard let at = rest.lastIndex(of: "@") else { return ICEServer(urls: ["\(scheme):\(rest)"]) }
    let credentials = rest[..<at]
    guard scheme.lowercased().hasPrefix("turn"), let split = credentials.firstIndex(of: ":"),
          !credentials[..<split].isEmpty, !rest[rest.index(after: at)...].isEmpty else {
        throw UsageError("--ice-server: credentials go with TURN only, as turn:USER:PASSWORD@HOST:PORT (got \(text))")
    }
    return ICEServer(urls: ["\(scheme):\(rest[rest.index(after: at)...])"],
                     username: String(credentials[..<split]), credential: String(credentials[credentials.index(after: split)...]))
}
