import Foundation
import Synchronization
import VeilCall
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A PulseAudio daemon of the test's own, so that real capture and playback can be tested on a
/// machine without a sound server, and without touching a user's session where there is one.
///
/// How it is started (Debian 12's pulseaudio 16.1; packages `pulseaudio` and `pulseaudio-utils`):
///
///     HOME=<dir>/home XDG_RUNTIME_DIR=<dir>/runtime PULSE_RUNTIME_PATH=<dir>/runtime \
///     PULSE_STATE_PATH=<dir>/state PULSE_COOKIE=<dir>/cookie \
///     pulseaudio --daemonize=no -n --exit-idle-time=-1 --disallow-exit --use-pid-file=no \
///         --realtime=no --high-priority=no --disable-shm=yes --log-target=stderr --log-level=error \
///         -L "module-native-protocol-unix socket=<dir>/native auth-anonymous=1" \
///         -L "module-null-sink sink_name=speaker rate=48000 channels=1 sink_properties='device.description=Speaker device.form_factor=speaker'" \
///         -L "module-null-sink sink_name=headset rate=48000 channels=1 sink_properties='device.description=Headset device.form_factor=headset'"
///
/// - `-n` loads no default.pa: only the modules given, no hardware, no module-suspend-on-idle
///   (the null sinks run all the time), no D-Bus or X11 modules.
/// - As root it runs without `--system` (it only warns "not intended to be run as root"):
///   `--system` would use the system-wide socket and configuration, which is what must be
///   avoided here. `--use-pid-file=no` lets it run beside a user's own server.
/// - Each null sink's `.monitor` source is a capture source that hears what plays on the sink.
/// - Clients reach it through `PULSE_SERVER=unix:<dir>/native`; in this process that variable
///   (and `PULSE_COOKIE`, so libpulse never writes a cookie into the real home) is set while the
///   server runs and restored by `stop()`, between tests (XCTest runs one at a time; the
///   process's pulse clients read it when they connect). Subprocesses (`pactl`, `paplay`, `parec`) get the whole private
///   environment.
///
/// Processes are started with posix_spawn, not Foundation's `Process`: pulseaudio closes every
/// inherited descriptor at start-up, which makes Foundation's process monitor take the daemon for
/// dead and block in `waitpid` on it, after which no other `Process` is ever seen to exit.
///
/// `stop()` ends everything it started (SIGTERM, then SIGKILL after 3 s, each process waited for)
/// and removes the directory; call it in a `defer`.
final class PrivatePulseServer: @unchecked Sendable {
    // Set once in init, except `children` and `stopped`, which sit behind `state`.
    let directory: URL
    /// The server address clients use: `unix:<dir>/native`.
    let address: String
    /// The environment of client subprocesses.
    let environment: [String: String]
    private var daemon: ChildProcess?
    private let tools: [String: String]
    private let savedEnvironment: [String: String?]
    private let state = Mutex<(children: [ChildProcess], stopped: Bool)>(([], false))

    /// The null sinks, in the order they are created (the first is the server's default).
    static let sinks = ["speaker", "headset"]

    /// Starts the daemon with a null sink per name in `sinks` and waits (≤ 10 s) until it answers.
    /// Throws `XCTSkip` when pulseaudio or pulseaudio-utils is not installed.
    init() throws {
        var tools: [String: String] = [:]
        for tool in ["pulseaudio", "pactl", "paplay", "parec"] {
            guard let path = Self.executable(tool) else {
                throw XCTSkip("\(tool) is not installed; apt-get install pulseaudio pulseaudio-utils to run the PulseAudio tests")
            }
            tools[tool] = path
        }
        self.tools = tools
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-pulse-\(UUID().uuidString.prefix(8))")
        for sub in ["home", "runtime", "state"] {
            try FileManager.default.createDirectory(at: directory.appendingPathComponent(sub), withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let socket = directory.appendingPathComponent("native").path
        address = "unix:\(socket)"
        let runtime = directory.appendingPathComponent("runtime").path
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory.appendingPathComponent("home").path
        environment["XDG_RUNTIME_DIR"] = runtime
        environment["PULSE_RUNTIME_PATH"] = runtime
        environment["PULSE_STATE_PATH"] = directory.appendingPathComponent("state").path
        environment["PULSE_COOKIE"] = directory.appendingPathComponent("cookie").path
        environment["PULSE_SERVER"] = address
        environment.removeValue(forKey: "DISPLAY")
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        self.environment = environment
        // Clients in this process (pulsesrc/pulsesink inside PeerConnection) find the server here.
        savedEnvironment = ["PULSE_SERVER", "PULSE_COOKIE"].reduce(into: [:]) { $0[$1] = ProcessInfo.processInfo.environment[$1] }
        setenv("PULSE_SERVER", address, 1)
        setenv("PULSE_COOKIE", directory.appendingPathComponent("cookie").path, 1)

        var arguments = ["--daemonize=no", "-n", "--exit-idle-time=-1", "--disallow-exit", "--use-pid-file=no",
                         "--realtime=no", "--high-priority=no", "--disable-shm=yes", "--log-target=stderr", "--log-level=error",
                         "-L", "module-native-protocol-unix socket=\(socket) auth-anonymous=1"]
        for sink in Self.sinks {
            let properties = "device.description=\(sink.capitalized) device.form_factor=\(sink)"
            arguments += ["-L", "module-null-sink sink_name=\(sink) rate=48000 channels=1 sink_properties='\(properties)'"]
        }
        let log = directory.appendingPathComponent("pulseaudio.log").path
        do {
            let daemon = try ChildProcess(tools["pulseaudio"] ?? "pulseaudio", arguments, environment: environment, standardError: log)
            self.daemon = daemon
            let deadline = Date().addingTimeInterval(10)
            while (try? pactl(["info"])) == nil {
                guard daemon.isRunning, Date() < deadline else {
                    let reason = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                    throw PulseServerError("the private PulseAudio server did not start within 10 s: \(reason)")
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Stops every process started here and the daemon, restores the environment, removes the
    /// directory. Idempotent; bounded (a few seconds at worst).
    func stop() {
        let children = state.withLock { state -> [ChildProcess]? in
            guard !state.stopped else { return nil }
            state.stopped = true
            return state.children
        }
        guard let children else { return }
        for process in children + [daemon].compactMap({ $0 }) { process.terminate() }
        for (name, value) in savedEnvironment {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `pactl` with `arguments` (≤ 5 s) and returns what it printed; throws when it fails.
    @discardableResult
    func pactl(_ arguments: [String]) throws -> String {
        let output = try ChildProcess.Pipe()
        let process = try ChildProcess(tools["pactl"] ?? "pactl", arguments, environment: environment, standardOutput: output)
        let data = output.readAll(until: Date().addingTimeInterval(5))
        let status = process.wait(until: Date().addingTimeInterval(1))
        let text = String(decoding: data, as: UTF8.self)
        guard status == 0 else { throw PulseServerError("pactl \(arguments.joined(separator: " ")) failed (\(status.map(String.init) ?? "timed out")): \(text)") }
        return text
    }

    /// Plays a sine of `frequency` Hz (amplitude 0.5, 60 s) into `sink` until `stop()`.
    func playTone(frequency: Double, into sink: String) throws {
        let file = directory.appendingPathComponent("tone-\(Int(frequency)).wav")
        if !FileManager.default.fileExists(atPath: file.path) { try writeSineWAV(to: file, frequency: frequency, seconds: 60) }
        try adopt(ChildProcess(tools["paplay"] ?? "paplay", ["--device=\(sink)", file.path], environment: environment))
    }

    /// Records `source` (e.g. "headset.monitor") as 48 kHz mono until `stop()`; returns once the
    /// first samples have arrived (≤ 5 s).
    func record(_ source: String) throws -> PulseRecording {
        let recording = PulseRecording()
        let output = try ChildProcess.Pipe()
        try adopt(ChildProcess(tools["parec"] ?? "parec",
                               ["--device=\(source)", "--raw", "--format=float32le", "--rate=48000", "--channels=1", "--latency-msec=20"],
                               environment: environment, standardOutput: output))
        // The reader ends when parec does (end of file).
        let thread = Thread { output.forEachChunk { recording.append($0) } }
        thread.name = "veil-test-parec"
        thread.start()
        // parec takes 1-2 s to deliver its first samples on a busy machine: wait for them, so that
        // what a test measures after this returns is really recorded.
        let deadline = Date().addingTimeInterval(5)
        while !recording.isLive {
            guard Date() < deadline else { throw PulseServerError("parec recorded nothing from \(source) within 5 s") }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return recording
    }

    private func adopt(_ process: ChildProcess) throws {
        let stopped = state.withLock { state -> Bool in
            if !state.stopped { state.children.append(process) }
            return state.stopped
        }
        if stopped {
            process.terminate()
            throw PulseServerError("the private PulseAudio server is stopped")
        }
    }

    private static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return (path.split(separator: ":") + ["/usr/bin", "/usr/sbin"]).map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// A process started with posix_spawn and reaped with waitpid: stdin from /dev/null, stdout to a
/// pipe or /dev/null, stderr to a file or /dev/null.
final class ChildProcess: @unchecked Sendable {
    // The exit status is only touched under `lock`.
    let pid: pid_t
    private let lock = Mutex<Int32?>(nil)

    /// The read end of a child's stdout (close-on-exec, closed on deinit).
    final class Pipe: @unchecked Sendable {
        // Both descriptors are fixed after init; `write` is closed once the child has its copy.
        let read: Int32
        fileprivate(set) var write: Int32
        init() throws {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw PulseServerError("pipe failed: errno \(errno)") }
            // Close-on-exec, so that no other child inherits them (the child's stdout is a dup2).
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            read = fds[0]
            write = fds[1]
        }
        deinit {
            close(read)
            if write >= 0 { close(write) }
        }
        /// Everything written until end of file or `deadline`.
        func readAll(until deadline: Date) -> Data {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                var descriptor = pollfd(fd: read, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 50) >= 0 else { break }
                guard descriptor.revents != 0 else { continue }
                let count = Glibc.read(read, &buffer, buffer.count)
                if count <= 0 { break }
                data.append(contentsOf: buffer[0..<count])
            }
            return data
        }
        /// Calls `body` with each chunk read, until end of file.
        func forEachChunk(_ body: (Data) -> Void) {
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = Glibc.read(read, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return }
                body(Data(buffer[0..<count]))
            }
        }
    }

    init(_ path: String, _ arguments: [String], environment: [String: String], standardOutput: Pipe? = nil,
         standardError: String? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let standardOutput {
            posix_spawn_file_actions_adddup2(&actions, standardOutput.write, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, standardError ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        if let standardOutput {
            close(standardOutput.write)
            standardOutput.write = -1
        }
        guard result == 0 else { throw PulseServerError("could not start \(path): error \(result)") }
        self.pid = pid
    }

    deinit { terminate() }

    /// Whether it has not exited yet (reaps it when it has).
    var isRunning: Bool { exitStatus() == nil }

    /// The exit status once exited (128 + signal when killed), nil while it runs.
    private func exitStatus() -> Int32? {
        lock.withLock { exited in
            if let exited { return exited }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            let code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            exited = code
            return code
        }
    }

    /// Waits until it exits or `deadline` passes; its exit status, or nil on timeout.
    func wait(until deadline: Date) -> Int32? {
        while true {
            if let status = exitStatus() { return status }
            guard Date() < deadline else { return nil }
            usleep(10_000)
        }
    }

    /// SIGTERM, up to 3 s to exit, then SIGKILL and a wait; idempotent.
    func terminate() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        guard wait(until: Date().addingTimeInterval(3)) == nil else { return }
        kill(pid, SIGKILL)
        _ = wait(until: Date().addingTimeInterval(5))
    }
}

/// What `parec` recorded: float samples, each with an estimated media time. A chunk is read when
/// its last sample has just been captured, so sample `j` of a chunk of `n` read at `t` was
/// captured at about `t - (n - j) / 48 kHz`; this keeps bursts (parec's first reads come in one
/// block) where they belong in time.
final class PulseRecording: Sendable {
    private let state = Mutex<(pending: [UInt8], chunks: [(endMicros: UInt64, samples: [Float])])>(([], []))

    fileprivate func append(_ data: Data) {
        guard !data.isEmpty else { return }
        let now = PeerConnection.mediaTimeMicros
        state.withLock { state in
            state.pending += data
            let whole = state.pending.count / 4 * 4
            guard whole > 0 else { return }
            var samples = [Float](repeating: 0, count: whole / 4)
            samples.withUnsafeMutableBytes { target in
                state.pending.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<whole])) }
            }
            state.pending.removeFirst(whole)
            state.chunks.append((now, samples))
        }
    }

    /// Whether samples have arrived.
    var isLive: Bool { state.withLock { !$0.chunks.isEmpty } }

    /// Samples captured between `start` and `end` (media time, µs).
    func samples(from start: UInt64, to end: UInt64 = .max) -> [Float] {
        state.withLock { state in
            var result: [Float] = []
            for chunk in state.chunks {
                let count = chunk.samples.count
                for (index, sample) in chunk.samples.enumerated() {
                    let time = chunk.endMicros &- UInt64(count - index) * 1_000_000 / 48_000
                    if time >= start && time < end { result.append(sample) }
                }
            }
            return result
        }
    }
}

/// The private server could not do what a test needed.
struct PulseServerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
