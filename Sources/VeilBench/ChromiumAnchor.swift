import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// libwebrtc's mouth-to-ear delay under the conditions Veil's is measured under: the anchor of the
/// bench's latency section.
///
/// Two RTCPeerConnections in one headless chromium page (bench/anchor/call.html) call each other
/// with Opus audio, host candidates only, and every datagram between them goes through a
/// `UDPRelay`: the page gives side A only the relay's socket facing A as B's candidate, and side B
/// only the socket facing B; the relay learns each side's real address from the first datagram it
/// gets from it. Side A sends tone bursts made by an AudioWorklet; side B's received track comes
/// back into the same AudioContext, where the worklet finds each burst's onset. Both ends are on
/// one audio clock, so the delay is chromium's: capture path, Opus, the network, NetEq, playout
/// into WebAudio, with no device buffer.
///
/// The page prints one JSON line per event on its console, which chromium writes to stderr
/// (`--enable-logging=stderr`); this harness reads them, switches the relay's impairment at each
/// condition's start and splits bursts and statistics by wall-clock time (`Timeline` says how).
/// The page is told nothing after its URL.
public struct ChromiumAnchor {
    /// Where Debian's chromium package puts the browser itself (/usr/bin/chromium is a wrapper script).
    public static let defaultChromium = "/usr/lib/chromium/chromium"

    /// The browser binary.
    public var chromium: String
    /// The page; nil: bench/anchor/call.html, looked for from the working directory, the
    /// executable's directory and this source file's checkout.
    public var page: URL?
    /// Time between burst starts, in milliseconds (four pitches: a burst is told from the next of
    /// its pitch up to four periods late).
    public var periodMillis = 500.0
    /// Length of each burst, in milliseconds.
    public var burstMillis = 80.0
    /// How long the browser may take to start, connect and get a first burst across.
    public var connectTimeoutSeconds = 30.0
    /// Seed of the relay's loss and delay draws.
    public var seed: UInt64 = 0xA9C4_0001

    /// An anchor on `chromium`.
    public init(chromium: String = ChromiumAnchor.defaultChromium, page: URL? = nil) {
        self.chromium = chromium
        self.page = page
    }

    /// Runs `schedule` back to back through one call and one relay, switching the relay's
    /// impairment at each condition's start, and returns one result per condition. `progress`
    /// hears of the connection and of each condition as it starts. Throws `ChromiumAnchorError`
    /// (`isNotInstalled` when chromium is missing) or the relay's `SetupError`. Blocks the calling
    /// thread for the whole schedule (plus a few seconds to start): not for the cooperative pool.
    public func run(_ schedule: [LatencyCondition], progress: (String) -> Void = { _ in }) throws -> [ConditionResult] {
        guard !schedule.isEmpty else { return [] }
        guard FileManager.default.isExecutableFile(atPath: chromium) else { throw ChromiumAnchorError.notInstalled(chromium) }
        let page = try self.page ?? Self.locatePage()
        guard let host = UDPRelay.hostAddress() else {
            throw ChromiumAnchorError.setupFailed("this machine has no IPv4 address besides loopback (chromium gathers no loopback candidates)")
        }
        let relay = try UDPRelay(host: host, seed: seed)
        defer { relay.close() }

        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("veil-anchor-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: profile) }
        let browser = try ChromiumProcess(executable: chromium, arguments: Self.arguments(profile: profile) + [
            try pageURL(page, host: host, relay: relay).absoluteString,
        ])
        defer { browser.stop() }  // before the profile goes (defers run in reverse)

        var timeline = Timeline(schedule: schedule, periodMillis: periodMillis, relayFacingB: "\(host):\(relay.portFacingB)")
        let started = Self.wallMillis()
        let connectDeadline = started + connectTimeoutSeconds * 1000
        let finalDeadline = connectDeadline + schedule.reduce(0) { $0 + $1.seconds } * 1000 + 15_000
        func diagnosis() -> String {
            let states = timeline.states.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
            let learned = relay.learned, counts = relay.counts
            return "connection \(states.isEmpty ? "not created" : states); relay heard a: \(learned.a), b: \(learned.b), "
                + "forwarded a→b \(counts.aToB.forwarded), b→a \(counts.bToA.forwarded); bursts emitted \(timeline.bursts.count)"
                + (browser.logTail.isEmpty ? "" : "; chromium's log ends:\n\(browser.logTail)")
        }
        while true {
            let (events, exited) = browser.takeEvents()
            for event in events {
                if case .failed(let message) = event { throw ChromiumAnchorError.pageFailed("\(message) (\(diagnosis()))") }
                let wasFlowing = timeline.isFlowing
                timeline.handle(event)
                if !wasFlowing && timeline.isFlowing { progress("anchor: \(timeline.browser) connected through the relay, audio flowing") }
            }
            if exited { throw ChromiumAnchorError.browserFailed("chromium exited during the run (\(diagnosis()))") }
            let now = Self.wallMillis()
            if let pending = timeline.pendingSwitch, now >= pending.wallMillis {
                if let index = pending.condition {
                    relay.impairment = schedule[index].impairment
                    progress("anchor: \(schedule[index].name) for \(String(format: "%.0f", schedule[index].seconds)) s")
                }
                let counts = relay.counts
                timeline.switched(atWallMillis: now, forwardedAToB: counts.aToB.forwarded, forwardedBToA: counts.bToA.forwarded,
                                  dropped: counts.aToB.dropped + counts.bToA.dropped)
                continue
            }
            if timeline.isComplete(nowMillis: now) { break }
            if timeline.boundaries.isEmpty && now > connectDeadline {
                throw ChromiumAnchorError.timedOut("no burst crossed the call within \(Int(connectTimeoutSeconds)) s (\(diagnosis()))")
            }
            if now > finalDeadline {
                throw ChromiumAnchorError.timedOut("the schedule did not finish in time (\(diagnosis()))")
            }
            let deadline = min(timeline.nextDeadlineMillis ?? .infinity, timeline.boundaries.isEmpty ? connectDeadline : finalDeadline)
            browser.waitForEvents(seconds: (deadline - now) / 1000)
        }
        return timeline.results()
    }

    /// chromium's command line, before the page: headless, the page's audio allowed to start, the
    /// worklet's blob: module allowed from a file:// page, console messages on stderr. Host
    /// candidates carry real addresses instead of mDNS names; the page passes none of its own on
    /// (the relay learns the addresses from datagrams), so this only keeps mDNS out of the call.
    static func arguments(profile: URL) -> [String] {
        ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--autoplay-policy=no-user-gesture-required", "--use-fake-ui-for-media-stream",
         "--disable-features=WebRtcHideLocalIpsWithMdns", "--allow-file-access-from-files",
         "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
         "--enable-logging=stderr", "--v=0", "--user-data-dir=\(profile.path)"]
    }

    /// The page with the relay's address and the burst timing in its query.
    private func pageURL(_ page: URL, host: String, relay: UDPRelay) throws -> URL {
        var components = URLComponents(url: page, resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "relayHost", value: host),
                                  URLQueryItem(name: "a", value: "\(relay.portFacingA)"),
                                  URLQueryItem(name: "b", value: "\(relay.portFacingB)"),
                                  URLQueryItem(name: "period", value: "\(periodMillis)"),
                                  URLQueryItem(name: "burst", value: "\(burstMillis)")]
        guard let url = components?.url else { throw ChromiumAnchorError.setupFailed("cannot make a URL of \(page.path)") }
        return url
    }

    /// bench/anchor/call.html in the nearest enclosing directory of the working directory, of the
    /// executable, or of this source file.
    static func locatePage() throws -> URL {
        let fm = FileManager.default
        let starts = [URL(fileURLWithPath: fm.currentDirectoryPath, isDirectory: true),
                      URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath().deletingLastPathComponent(),
                      URL(fileURLWithPath: #filePath).deletingLastPathComponent()]
        for start in starts {
            var directory = start.standardizedFileURL
            while true {
                let candidate = directory.appendingPathComponent("bench/anchor/call.html")
                if fm.fileExists(atPath: candidate.path) { return candidate }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        throw ChromiumAnchorError.setupFailed("bench/anchor/call.html not found from here or from the veil executable; run from the checkout")
    }

    /// Milliseconds since the epoch: the clock the page's Date.now() and performance.timeOrigin read.
    static func wallMillis() -> Double { Date().timeIntervalSince1970 * 1000 }
}

/// Why the Chromium anchor could not measure.
public struct ChromiumAnchorError: Error, CustomStringConvertible, Equatable {
    private enum Code: Equatable { case notInstalled, setupFailed, browserFailed, pageFailed, timedOut }
    private let code: Code
    /// What failed and what to do about it.
    public let description: String

    /// The browser is not where it was looked for.
    static func notInstalled(_ path: String) -> ChromiumAnchorError {
        ChromiumAnchorError(code: .notInstalled,
                            description: "chromium is not installed (no \(path)): install Debian's chromium package (apt-get install chromium; scripts/bootstrap does)")
    }
    /// Something the run needs is missing (an address, the page).
    static func setupFailed(_ what: String) -> ChromiumAnchorError { ChromiumAnchorError(code: .setupFailed, description: what) }
    /// The browser could not be started or exited.
    static func browserFailed(_ what: String) -> ChromiumAnchorError { ChromiumAnchorError(code: .browserFailed, description: what) }
    /// The page reported an error.
    static func pageFailed(_ what: String) -> ChromiumAnchorError { ChromiumAnchorError(code: .pageFailed, description: "the anchor page failed: \(what)") }
    /// The call did not connect, or the schedule did not finish, in time.
    static func timedOut(_ what: String) -> ChromiumAnchorError { ChromiumAnchorError(code: .timedOut, description: what) }

    /// Whether chromium is missing (the bench shows the anchor as not installed).
    public var isNotInstalled: Bool { code == .notInstalled }

    public static func == (a: ChromiumAnchorError, b: ChromiumAnchorError) -> Bool { a.code == b.code }
}
