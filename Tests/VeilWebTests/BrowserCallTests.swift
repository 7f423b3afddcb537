import Foundation
import Synchronization
import VeilCairo
import VeilCall
import VeilCore
import VeilVision
import VeilRender
import VeilServer
import VeilTestSupport
import XCTest

/// The browser client (web/) in Debian's headless chromium, driven over WebDriver, in real calls:
/// a real room server serving the page, a `veil call` process, and a `CallSession` in this process
/// standing for another native participant whose expressions the test controls.
final class BrowserCallTests: XCTestCase {
    private var work: URL!
    private var server: RoomServer!
    private var authority: TokenAuthority!
    private var driver: WebDriver!
    private var children: [Process] = []
    private var sessions: [CallSession] = []

    /// The repository's web/ directory.
    static let webDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("web", isDirectory: true)

    /// Runs in every page before its own scripts: records every getUserMedia request and every
    /// RTCPeerConnection the page makes, whatever the page itself reports.
    static let probeScript = """
    (() => {
      const probe = window.__veilProbe = { getUserMedia: [], peerConnections: 0 };
      const record = (constraints) => probe.getUserMedia.push(JSON.stringify(constraints === undefined ? null : constraints));
      const devices = navigator.mediaDevices;
      if (devices && devices.getUserMedia) {
        const original = devices.getUserMedia.bind(devices);
        devices.getUserMedia = (constraints) => { record(constraints); return original(constraints); };
      }
      for (const name of ['getUserMedia', 'webkitGetUserMedia']) {
        const legacy = navigator[name];
        if (typeof legacy === 'function') navigator[name] = function (constraints, ...rest) { record(constraints); return legacy.call(navigator, constraints, ...rest); };
      }
      const Native = window.RTCPeerConnection;
      window.RTCPeerConnection = class extends Native { constructor(...args) { super(...args); probe.peerConnections++; } };
    })();
    """

    override func setUpWithError() throws {
        driver = try WebDriver()
        work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-web-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let secret = ServerSecret.random()
        authority = TokenAuthority(secret: secret)
        server = RoomServer(configuration: .init(secret: secret, host: "127.0.0.1", port: 0, webRoot: Self.webDirectory))
        try server.start()
    }

    override func tearDownWithError() throws {
        for child in children where child.isRunning { child.terminate() }
        for child in children { child.waitUntilExit() }
        for session in sessions { awaitLeave(session) }
        driver?.stop()
        server?.stop()
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    // MARK: - Tests

    /// A browser and two native participants (`veil call` with a synthetic camera and a tone, and
    /// an in-process session whose jaw the test opens and closes): each side hears and sees the other.
    func testBrowserAndNativeParticipantsHearAndSeeEachOther() throws {
        let clip = try makeCameraClip()
        let speech = makeSpeech()
        // Carol (in process) first, then `veil call`, then the browser: the browser offers to both.
        let (carol, carolLog) = try nativeSession(room: "r1", user: "carol")
        let jaw = Jaw()
        let sender = sendExpressions(from: carol, jaw: jaw)
        defer { sender.cancel() }
        XCTAssertTrue(waitUntil(10) { carolLog.joined }, "carol did not join")
        let native = try veil(["call", "--server", server.webSocketURL!.absoluteString, "--room", "r1", "--user", "native",
                               "--token", try token("r1", "native"), "--video", clip.path, "--audio-in", "tone",
                               "--out", "none", "--audio-out", "none", "--duration", "60", "--json"])
        XCTAssertTrue(waitUntil(10) { carolLog.events.contains { if case .participantJoined("native") = $0 { true } else { false } } },
                      "veil call did not join")

        let browser = try browser(audioFile: speech)
        defer { browser.delete() }
        try openPage(browser, room: "r1", user: "web")
        // The link's fragment filled the form and left the address bar.
        XCTAssertEqual(try browser.execute("return [location.hash, document.getElementById('room').value, document.getElementById('user').value]") as? [String],
                       ["", "r1", "web"])
        let joinStart = Date()
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 5), browser.pageState())
        let connected = try browser.wait(for: "['native', 'carol'].every((u) => window.veil.remotes[u] && window.veil.remotes[u].state === 'connected')", timeout: 10)
        XCTAssertTrue(connected, browser.pageState())
        let joinMillis = Date().timeIntervalSince(joinStart) * 1000
        let measured = try browser.execute("return [window.veil.certificateMillis, window.veil.firstConnectedMillis]") as? [Double]
        print("browser join steps (ms after Join): \(try browser.execute("return JSON.stringify(window.veil.timings)") as? String ?? "")")
        print("browser join: click → both peers connected \(Int(joinMillis)) ms (page: first peer connected \(Int(measured?[1] ?? -1)) ms after Join; certificate made at load in \(Int(measured?[0] ?? -1)) ms)")

        // The browser receives both participants' voices and expression frames.
        let first = try remoteFigures(browser)
        Thread.sleep(forTimeInterval: 2)
        let second = try remoteFigures(browser)
        for user in ["native", "carol"] {
            let a = first[user] ?? [:], b = second[user] ?? [:]
            XCTAssertGreaterThan(b["audioPackets"] ?? 0, (a["audioPackets"] ?? 0) + 50, "\(user)'s audio packets should rise: \(a) → \(b)")
            XCTAssertGreaterThan(b["audioBytes"] ?? 0, a["audioBytes"] ?? 0, "\(user)'s audio bytes")
            XCTAssertGreaterThan(b["audioLevel"] ?? 0, 0.01, "\(user)'s tone should be audible in the page (analyser RMS)")
            // 30/s are sent; a busy machine may track the native side's clip more slowly, but the
            // avatar must visibly keep moving (10/s or more).
            XCTAssertGreaterThan(b["framesDecoded"] ?? 0, (a["framesDecoded"] ?? 0) + 20, "\(user)'s expression frames should keep arriving")
            XCTAssertEqual(b["framesInvalid"] ?? -1, 0)
            let alignment = try browser.execute("return window.veil.remotes[arguments[0]].alignment", [user]) as? String ?? "none"
            print("browser ← \(user): \(Int(b["audioPackets"] ?? 0)) audio packets, RMS \(String(format: "%.3f", b["audioLevel"] ?? 0)), \(Int(b["framesDecoded"] ?? 0)) frames decoded, avatar aligned by \(alignment)")
        }

        // Carol's avatar in the page opens its mouth when her jaw opens, and little else changes.
        jaw.value = 0
        Thread.sleep(forTimeInterval: 1)
        try capture(browser, user: "carol", as: "closed")
        jaw.value = 1
        // The avatar follows the voice it belongs to, which a busy machine may play later: look
        // again every 0.25 s for up to 5 s rather than once after a fixed second.
        let opened = Date()
        var mouth = 0.0
        repeat {
            Thread.sleep(forTimeInterval: 0.25)
            try capture(browser, user: "carol", as: "open")
            mouth = try difference(browser, "closed", "open", region: (0.3, 0.55, 0.7, 0.95))
        } while mouth <= 0.02 && Date().timeIntervalSince(opened) < 5
        print(String(format: "carol's mouth opened in the page %.2f s after her jaw did", Date().timeIntervalSince(opened)))
        let eyes = try difference(browser, "closed", "open", region: (0.2, 0.1, 0.8, 0.4))
        print("carol's tile, jaw closed vs open: \(String(format: "%.1f", mouth * 100)) % of the mouth region differs, \(String(format: "%.1f", eyes * 100)) % of the eye region")
        XCTAssertGreaterThan(mouth, 0.02, "the mouth region should change when the jaw opens")
        XCTAssertLessThan(eyes, mouth / 2, "opening the jaw should change the mouth more than the eyes")
        // What the page drew for the open jaw is what the Swift renderer draws for the same frame.
        let (swiftDifference, swiftMouth, strongShare) = try compareWithSwiftRenderer(browser, user: "carol", jawOpen: 1)
        print(String(format: "carol's tile vs the Swift renderer: mean |Δ| %.2f (mouth %.2f), %.3f %% of pixels off by > 48", swiftDifference, swiftMouth, strongShare * 100))
        XCTAssertLessThan(swiftDifference, 1.5, "the page should draw what the Swift renderer draws")
        XCTAssertLessThan(swiftMouth, 5)
        XCTAssertLessThan(strongShare, 0.005)
        // The native participant's talking clip moves its avatar too. Watched for 2 s: the clip
        // has pauses of up to about 1.1 s between phrases, in which a still avatar is right.
        try capture(browser, user: "native", as: "n0")
        var moved = 0.0
        for n in 1...4 {
            Thread.sleep(forTimeInterval: 0.5)
            try capture(browser, user: "native", as: "n\(n)")
            moved = max(moved, try difference(browser, "n0", "n\(n)", region: (0, 0, 1, 1)))
        }
        XCTAssertGreaterThan(moved, 0.001, "the veil call participant's avatar should move")
        try browser.screenshot().write(to: work.appendingPathComponent("call.png"))

        // Muting in the page reaches the others.
        try browser.execute("document.getElementById('mute').click()")
        XCTAssertTrue(waitUntil(3) { carolLog.events.contains { if case .muteChanged("web", true) = $0 { true } else { false } } }, "carol should see web muted")
        try browser.execute("document.getElementById('mute').click()")

        // The natives receive the browser's voice and its voice-driven expressions.
        let fromWeb = carolLog.frames(from: "web")
        XCTAssertGreaterThan(fromWeb.count, 60, "carol should receive the browser's expression frames")
        XCTAssertTrue(fromWeb.allSatisfy { $0.isVoiceDriven && $0.state == .tracked }, "every frame from the browser is marked voice-driven")
        // The page has no camera path: what it sends is the voice-driven vocabulary (jaw, funnel,
        // blinks of both eyes, brows up), left and right alike, numbered from a random start.
        let voiceShapes: Set<BlendShape> = [.jawOpen, .mouthFunnel, .eyeBlinkLeft, .eyeBlinkRight, .browInnerUp, .browOuterUpLeft, .browOuterUpRight]
        for frame in fromWeb {
            let beyond = BlendShape.allCases.filter { !voiceShapes.contains($0) && frame.expression[$0] > 0 }
            XCTAssertEqual(beyond, [], "a frame from the browser carries more than a voice gives")
            XCTAssertEqual(frame.expression[.eyeBlinkLeft], frame.expression[.eyeBlinkRight], "a one-sided blink from the browser")
        }
        XCTAssertFalse(fromWeb.contains { $0.sequence < 1000 }, "the page numbers its frames from 0: \(fromWeb.prefix(3).map(\.sequence))")
        let jawValues = fromWeb.map { $0.expression[.jawOpen] }
        let jawRange = (jawValues.max() ?? 0) - (jawValues.min() ?? 0)
        print("carol ← web: \(fromWeb.count) frames, all voice-driven; jawOpen \(String(format: "%.2f…%.2f", jawValues.min() ?? 0, jawValues.max() ?? 0))")
        XCTAssertGreaterThan(jawRange, 0.05, "the browser's avatar mouth should follow its speech")
        let carolStatistics = carolLog.latestStatistics?.peers["web"]
        XCTAssertGreaterThan(carolStatistics?.audioBitrateIn ?? 0, 8000, "carol should receive the browser's Opus voice")

        try assertNeverAskedForVideo(browser)
        try browser.execute("document.getElementById('leave').click()")

        // veil call reports the browser leaving; its statistics so far are all the test needs.
        XCTAssertTrue(waitUntil(5) { native.output().contains("\"participantLeft\"") }, "veil call did not see the browser leave")
        native.process.terminate()
        native.process.waitUntilExit()
        let lines = native.output().split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let webPeers = lines.filter { $0["event"] as? String == "statistics" }
            .compactMap { ($0["peers"] as? [[String: Any]])?.first { $0["user"] as? String == "web" } }
        XCTAssertTrue(webPeers.contains { ($0["audioBitrateIn"] as? Double ?? 0) > 8000 }, "veil call should receive the browser's voice: \(webPeers)")
        XCTAssertTrue(webPeers.contains { ($0["expressionFramesPerSecond"] as? Double ?? 0) > 20 }, "veil call should receive ~30 frames/s: \(webPeers)")
        XCTAssertTrue(lines.contains { $0["event"] as? String == "participantLeft" && $0["user"] as? String == "web" && $0["reason"] as? String == "left" })
    }

    /// A participant who switches away from the call's tab keeps their avatar alive for the others:
    /// the page's frames run on the audio clock, which browsers do not throttle (its own timers
    /// drop to about one a second while hidden, as chromedriver is told to leave them; the other
    /// side sends silence, since a page that plays sound is spared the throttling). `veil call`
    /// receives the hidden page's frames at 25 frames/s or more, as when it is in view; and when
    /// the page shows again it draws the current expression at once.
    func testAHiddenPageKeepsSendingItsAvatar() throws {
        let native = try veil(["call", "--server", server.webSocketURL!.absoluteString, "--room", "r10", "--user", "native",
                               "--token", try token("r10", "native"), "--camera", "none", "--audio-in", "none",
                               "--out", "none", "--audio-out", "none", "--duration", "40", "--json"])
        XCTAssertTrue(waitUntil(10) { self.server.status().participants == 1 }, "veil call did not join")
        let browser = try browser(audioFile: makeSpeech())
        defer { browser.delete() }
        try openPage(browser, room: "r10", user: "web")
        try browser.execute("""
            const v = window.veil;
            v.visibilityLog = [];
            document.addEventListener('visibilitychange', () => v.visibilityLog.push([document.visibilityState, performance.now()]));
            v.timerTicks = 0;
            setInterval(() => v.timerTicks++, 1000 / 30);
            """)
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.remotes.native && window.veil.remotes.native.state === 'connected' && window.veil.remotes.native.framesDecoded > 30", timeout: 15),
                      browser.pageState())
        Thread.sleep(forTimeInterval: 2.5)

        func figures() throws -> [String: Double] {
            let value = try browser.execute("""
                const v = window.veil, r = v.remotes.native;
                return { now: performance.now(), timerTicks: v.timerTicks, audioTicks: v.clock?.audio ?? 0, workerTicks: v.clock?.worker ?? 0,
                         sent: v.framesSent, received: r.framesDecoded, lastReceived: r.lastReceivedSequence };
                """) as? [String: Any] ?? [:]
            return value.compactMapValues { ($0 as? NSNumber)?.doubleValue }
        }
        let shown = try figures()
        try browser.minimize()
        let hiddenAt = Date()
        XCTAssertTrue(try browser.wait(for: "document.visibilityState === 'hidden'", timeout: 3), "minimising did not hide the page")
        Thread.sleep(forTimeInterval: 9)
        let hidden = try figures()
        let shownAgainAt = Date()
        try browser.restore()
        XCTAssertTrue(try browser.wait(for: "document.visibilityState === 'visible'", timeout: 3), "the page did not show again")
        let back = try figures()
        let log = try browser.execute("return window.veil.visibilityLog") as? [[Any]] ?? []

        let seconds = ((hidden["now"] ?? 0) - (shown["now"] ?? 0)) / 1000
        func rate(_ key: String) -> Double { ((hidden[key] ?? 0) - (shown[key] ?? 0)) / max(seconds, 0.001) }
        print(String(format: "hidden page, %.1f s: frames sent %.1f/s (audio-clock ticks %.1f/s, worker ticks %.1f/s); the page's own 30/s timer ran %.1f/s; frames received %.1f/s",
                     seconds, rate("sent"), rate("audioTicks"), rate("workerTicks"), rate("timerTicks"), rate("received")))
        // The test did hide the page: its own timers were throttled.
        XCTAssertEqual(log.first?.first as? String, "hidden", "visibility changes: \(log)")
        XCTAssertLessThan(rate("timerTicks"), 10, "a hidden page's timers should be throttled, or the test does not test anything")
        XCTAssertGreaterThanOrEqual(rate("sent"), 25, browser.pageState())

        // veil call's statistics over windows (2 s each) that lie wholly inside the hidden time.
        let statistics = native.events().filter { $0.event["event"] as? String == "statistics"
            && $0.arrived > hiddenAt.addingTimeInterval(2.5) && $0.arrived <= shownAgainAt }
        let received = statistics.compactMap { entry in
            (entry.event["peers"] as? [[String: Any]])?.first { $0["user"] as? String == "web" }?["expressionFramesPerSecond"] as? Double
        }
        print("veil call ← hidden page: expression frames/s \(received.map { String(format: "%.1f", $0) }.joined(separator: ", "))")
        XCTAssertGreaterThanOrEqual(received.count, 2, "veil call reported no statistics while the page was hidden: \(native.output().suffix(2000))")
        XCTAssertTrue(received.allSatisfy { $0 >= 25 }, "veil call should receive ≥ 25 frames/s from a hidden page: \(received)")

        // Shown again: drawn at once (in the visibility change itself), with a current frame.
        let onShow = try browser.execute("return window.veil.drawnOnShow") as? [String: Any]
        let drawnAt = (onShow?["at"] as? NSNumber)?.doubleValue ?? -1
        let sequences = (onShow?["remotes"] as? [String: Any])?["native"] as? [String: Any]
        let drawn = (sequences?["drawn"] as? NSNumber)?.doubleValue ?? -1, newest = (sequences?["newest"] as? NSNumber)?.doubleValue ?? -1
        print(String(format: "shown again: drawn %.1f ms into the page's return, frame %.0f of the newest %.0f received (%.0f arrived while hidden)",
                     drawnAt - (hidden["now"] ?? 0), drawn, newest, newest - (shown["lastReceived"] ?? 0)))
        XCTAssertGreaterThan(drawnAt, hidden["now"] ?? .infinity, "the page did not draw when it became visible: \(String(describing: onShow))")
        XCTAssertGreaterThan(drawn, shown["lastReceived"] ?? .infinity, "shown again, the page drew a frame from before it was hidden")
        XCTAssertLessThanOrEqual(newest - drawn, 15, "shown again, the page drew an old expression (the voice's playout delay is a few frames)")
        XCTAssertEqual(back["lastReceived"].map { $0 >= newest }, true)
        try browser.execute("document.getElementById('leave').click()")
    }

    /// "Pop out" puts the call in a floating window that stays on top, as call apps on phones do:
    /// with Document Picture-in-Picture the others' tiles (avatar, name, mute state) and the own
    /// inset move into it and come back when it closes; without it (the API removed here), a video
    /// of the avatars plays picture-in-picture. While the tab is hidden both keep drawing and the
    /// page keeps sending. (That the window floats above other applications is the browser's and
    /// the desktop's doing, and was not checked here: headless chromium has no desktop.)
    func testPictureInPictureKeepsTheCallInView() throws {
        let (carol, carolLog) = try nativeSession(room: "r11", user: "carol")
        let sender = sendExpressions(from: carol, jaw: Jaw(0.3))
        defer { sender.cancel() }
        XCTAssertTrue(waitUntil(10) { carolLog.joined })
        carol.setMuted(true)
        for kind in ["document", "video"] {
            let browser = try browser()
            defer { browser.delete() }
            if kind == "video" { try browser.addScriptAtDocumentStart("delete window.documentPictureInPicture;") }
            try openPage(browser, room: "r11", user: "web")
            try browser.execute("document.getElementById('join').click()")
            XCTAssertTrue(try browser.wait(for: "window.veil.remotes.carol && window.veil.remotes.carol.state === 'connected' && window.veil.remotes.carol.framesDecoded > 10", timeout: 15),
                          browser.pageState())
            XCTAssertEqual(try browser.execute("return document.getElementById('pip').hidden") as? Bool, false, "no Pop out button")
            try browser.click("#pip")
            XCTAssertTrue(try browser.wait(for: "window.veil.pip === '\(kind)'", timeout: 5), "\(kind): the floating window did not open: \(browser.pageState())")
            if kind == "document" {
                // The tiles live in the floating window now, with the name and the mute state.
                let inWindow = try browser.execute("""
                    const d = documentPictureInPicture.window?.document;
                    const tile = d?.querySelector('figure.tile[data-user="carol"]');
                    return [!!d?.getElementById('self-canvas'), tile?.querySelector('figcaption span')?.textContent ?? '',
                            tile ? !tile.querySelector('.muted-badge').hidden : false, document.querySelectorAll('figure.tile').length];
                    """) as? [Any] ?? []
                XCTAssertEqual(inWindow.first as? Bool, true, "the own inset should be in the floating window: \(inWindow)")
                XCTAssertEqual(inWindow.dropFirst().first as? String, "carol")
                XCTAssertEqual(inWindow.dropFirst(2).first as? Bool, true, "carol's mute state should show in the floating window")
                XCTAssertEqual(inWindow.last as? Int, 0, "no tile should stay behind in the tab")
                XCTAssertEqual(try browser.windowHandles().count, 2, "the floating window is a window of its own")
            } else {
                XCTAssertEqual(try browser.execute("return document.pictureInPictureElement?.id") as? String, "pip-video")
            }
            // The tab goes to the background; the floating window keeps drawing and the page sending.
            func counts() throws -> [Double] {
                (try browser.execute("return [performance.now(), window.veil.framesDrawn, window.veil.framesSent]") as? [NSNumber] ?? []).map(\.doubleValue)
            }
            try browser.minimize()
            XCTAssertTrue(try browser.wait(for: "document.visibilityState === 'hidden'", timeout: 3))
            let a = try counts()
            Thread.sleep(forTimeInterval: 4)
            let b = try counts()
            let seconds = ((b.first ?? 0) - (a.first ?? 0)) / 1000
            let drawn = ((b.dropFirst().first ?? 0) - (a.dropFirst().first ?? 0)) / max(seconds, 0.001)
            let sent = ((b.last ?? 0) - (a.last ?? 0)) / max(seconds, 0.001)
            print(String(format: "picture-in-picture (%@), tab hidden %.1f s: drawn %.1f/s, sent %.1f frames/s", kind, seconds, drawn, sent))
            XCTAssertGreaterThanOrEqual(drawn, 20, "\(kind): the floating window should keep drawing while the tab is hidden")
            XCTAssertGreaterThanOrEqual(sent, 25, "\(kind): the page should keep sending while the tab is hidden")
            if kind == "video" {
                // The video window shows the avatar, and the name with the mute state.
                let picture = try browser.execute("""
                    const c = document.createElement('canvas'), v = document.getElementById('pip-video');
                    c.width = v.videoWidth; c.height = v.videoHeight;
                    const x = c.getContext('2d'); x.drawImage(v, 0, 0);
                    const d = x.getImageData(0, 0, c.width, c.height).data;
                    let bright = 0; for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] > 300) bright++;
                    return [c.width, c.height, bright / (d.length / 4)];
                    """) as? [NSNumber] ?? []
                print("picture-in-picture video: \(picture)")
                XCTAssertEqual(picture.first?.intValue, 480)
                XCTAssertGreaterThan(picture.last?.doubleValue ?? 0, 0.01, "the video window shows no avatar")
            }
            try browser.restore()
            // Closing it brings everything back into the tab.
            try browser.execute(kind == "document" ? "documentPictureInPicture.window.close()" : "document.exitPictureInPicture()")
            XCTAssertTrue(try browser.wait(for: "window.veil.pip === null && document.querySelector('figure.tile[data-user=\"carol\"]') !== null && document.getElementById('self-canvas') !== null", timeout: 5),
                          "\(kind): closing the floating window should bring the call back: \(browser.pageState())")
            try browser.execute("document.getElementById('leave').click()")
        }
    }

    /// A bad token gets a clear message on the page, and the page makes no connection and asks
    /// for no microphone.
    func testBadTokenShowsAClearMessageAndConnectsNothing() throws {
        let browser = try browser()
        defer { browser.delete() }
        let forged = try TokenAuthority(secret: ServerSecret.random()).issue(room: "r2", user: "web", lifetime: 600)
        let cases: [(token: String, room: String, expected: String)] = [
            (forged, "r2", "not issued by this server"),
            (try token("other", "web"), "r2", "for another room"),
            ("v1.nonsense", "r2", "not a Veil token"),
        ]
        for item in cases {
            try openPage(browser, room: item.room, user: "web", token: item.token)
            try browser.execute("document.getElementById('join').click()")
            XCTAssertTrue(try browser.wait(for: "window.veil.status === 'error'", timeout: 5), browser.pageState())
            let message = try browser.execute("return document.getElementById('message').textContent") as? String ?? ""
            XCTAssertTrue(message.contains(item.expected), "message: \(message)")
            XCTAssertEqual(try browser.execute("return document.getElementById('call').hidden") as? Bool, true)
            XCTAssertEqual(try browser.execute("return window.__veilProbe.peerConnections") as? Int, 0, "no RTCPeerConnection")
            XCTAssertEqual((try browser.execute("return window.__veilProbe.getUserMedia") as? [String])?.count, 0, "no microphone prompt for a bad link")
        }
        // A name the protocol does not allow is refused before anything connects.
        try openPage(browser, room: "r2", user: "web")
        try browser.execute("document.getElementById('user').value = 'two words'; document.getElementById('join').click()")
        let message = try browser.execute("return document.getElementById('message').textContent") as? String ?? ""
        XCTAssertTrue(message.contains("Your name must be"), message)
        XCTAssertEqual(try browser.execute("return window.veil.status") as? String, "lobby")
        XCTAssertEqual(server.status().connections, 0)
    }

    /// Leave in the page: the others see `left`. Closing the tab without leaving: `timeout` within 5 s.
    /// Here the native side joins second, so it offers and the browser answers.
    func testLeavingAndClosingTheTab() throws {
        let browser = try browser()
        defer { browser.delete() }
        try openPage(browser, room: "r3", user: "web")
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 5), browser.pageState())

        let (carol, carolLog) = try nativeSession(room: "r3", user: "carol")
        let sender = sendExpressions(from: carol, jaw: Jaw(0.5))
        defer { sender.cancel() }
        XCTAssertTrue(waitUntil(10) { carolLog.events.contains { if case .peerState("web", .connected) = $0 { true } else { false } } },
                      "carol's offer to the browser should connect: \(carolLog.events)")
        XCTAssertTrue(try browser.wait(for: "(window.veil.remotes.carol?.framesDecoded ?? 0) > 20", timeout: 5), browser.pageState())
        XCTAssertTrue(waitUntil(5) { carolLog.frames(from: "web").count > 20 }, "carol should receive the browser's frames")

        try browser.execute("document.getElementById('leave').click()")
        XCTAssertTrue(waitUntil(3) { carolLog.events.contains { if case .participantLeft("web", .left) = $0 { true } else { false } } },
                      "carol should see web leave: \(carolLog.events)")
        XCTAssertEqual(try browser.execute("return document.getElementById('lobby').hidden") as? Bool, false)

        // Join again, then close the tab without leaving.
        carolLog.clear()
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 5), browser.pageState())
        XCTAssertTrue(waitUntil(10) { carolLog.events.contains { if case .peerState("web", .connected) = $0 { true } else { false } } })
        let page = try XCTUnwrap(browser.windowHandles().first)
        let other = try browser.newTab()
        try browser.switchTo(page)
        try browser.closeCurrentTab()
        let closedAt = Date()
        try browser.switchTo(other)
        let timedOut = waitUntil(7) { carolLog.events.contains { if case .participantLeft("web", .timeout) = $0 { true } else { false } } }
        let elapsed = Date().timeIntervalSince(closedAt)
        print("tab closed: participantLeft(timeout) after \(String(format: "%.1f", elapsed)) s")
        XCTAssertTrue(timedOut, "carol should see web time out: \(carolLog.events)")
        XCTAssertLessThanOrEqual(elapsed, 5.0)
        XCTAssertFalse(carolLog.events.contains { if case .participantLeft("web", .left) = $0 { true } else { false } },
                       "closing the tab is not a leave")
    }

    /// Someone who leaves while the page still waits for its microphone (a permission prompt can
    /// take long) gets no offer and leaves no tile behind; the room's others are shown at once.
    func testWhoLeavesWhileTheMicrophoneIsAskedForGetsNoOffer() throws {
        let (carol, carolLog) = try nativeSession(room: "r7", user: "carol")
        XCTAssertTrue(waitUntil(10) { carolLog.joined })
        let browser = try browser()
        defer { browser.delete() }
        // The microphone answers only when the test says so, like a permission prompt.
        try browser.addScriptAtDocumentStart("""
            (() => {
              const devices = navigator.mediaDevices;
              const original = devices.getUserMedia.bind(devices);
              const answered = new Promise((resolve) => { window.__answerMicrophone = resolve; });
              devices.getUserMedia = (constraints) => answered.then(() => original(constraints));
            })();
            """)
        try openPage(browser, room: "r7", user: "web")
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 5), browser.pageState())
        XCTAssertTrue(try browser.wait(for: "document.querySelector('figure.tile[data-user=\"carol\"]') !== null", timeout: 2),
                      "carol's tile should show while the microphone is asked for: \(browser.pageState())")

        awaitLeave(carol)
        XCTAssertTrue(waitUntil(5) { self.server.status().participants == 1 }, "carol should have left")
        XCTAssertTrue(try browser.wait(for: "document.querySelectorAll('figure.tile').length === 0", timeout: 3),
                      "carol's tile should go when she leaves: \(browser.pageState())")
        try browser.execute("window.__answerMicrophone()")
        XCTAssertTrue(try browser.wait(for: "window.veil.timings && window.veil.timings.microphone != null", timeout: 5), browser.pageState())
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(try browser.execute("return document.querySelectorAll('figure.tile').length") as? Int, 0,
                       "a tile for someone who left: \(browser.pageState())")
        XCTAssertEqual(try browser.execute("return window.__veilProbe.peerConnections") as? Int, 0,
                       "a connection offered to someone who left: \(browser.pageState())")
        XCTAssertEqual(try browser.execute("return window.veil.status") as? String, "joined")
    }

    /// Without a microphone the page sends silence from a Web Audio source; leaving stops it, so
    /// joining and leaving again leaves nothing running.
    func testLeavingStopsTheSilenceThatStandsInForAMissingMicrophone() throws {
        let browser = try browser(extraArguments: ["--deny-permission-prompts"], fakeMediaPermission: false)
        defer { browser.delete() }
        try browser.addScriptAtDocumentStart("""
            (() => {
              const count = window.__silence = { started: 0, stopped: 0 };
              const create = BaseAudioContext.prototype.createConstantSource;
              BaseAudioContext.prototype.createConstantSource = function (...args) {
                const node = create.apply(this, args);
                const start = node.start.bind(node), stop = node.stop.bind(node);
                node.start = (...a) => { count.started++; return start(...a); };
                node.stop = (...a) => { count.stopped++; return stop(...a); };
                return node;
              };
            })();
            """)
        try openPage(browser, room: "r8", user: "web")
        for round in 1...2 {
            try browser.execute("document.getElementById('join').click()")
            XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined' && window.veil.timings && window.veil.timings.microphone != null", timeout: 5),
                          browser.pageState())
            XCTAssertEqual(try browser.execute("return window.__silence.started") as? Int, round, "no microphone: silence is sent")
            try browser.execute("document.getElementById('leave').click()")
            XCTAssertTrue(try browser.wait(for: "window.veil.status === 'left'", timeout: 5), browser.pageState())
            XCTAssertEqual(try browser.execute("return window.__silence.stopped") as? Int, round, "the silence still runs after leaving")
        }
    }

    /// A hostile participant (a second browser, scripted; the server already drops messages that
    /// break the protocol): an offer that is not SDP, candidates that are not candidates, a channel with another label, two "expressions" channels, oversized,
    /// malformed and text messages. The page stays in the call, counts what it rejects, closes the
    /// extra channels (the first "expressions" channel is the one), and still decodes and draws the
    /// valid frames that follow.
    func testAHostilePeerCannotBreakThePage() throws {
        let browser = try browser()
        defer { browser.delete() }
        try openPage(browser, room: "r9", user: "web")
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 5), browser.pageState())

        let mallory = try driver.session()
        defer { mallory.delete() }
        try mallory.navigate(try XCTUnwrap(server.pageURL))
        try mallory.execute("""
            const [token] = arguments;
            (async () => {
              const m = window.__mallory = { log: [] };
              const wire = await import('/wire.js');
              const ws = new WebSocket(`ws://${location.host}/ws`);
              const send = (x) => ws.send(JSON.stringify({ v: 1, ...x }));
              const pc = new RTCPeerConnection();
              pc.addTransceiver('audio', { direction: 'sendrecv' });
              const first = pc.createDataChannel('expressions', { ordered: false, maxRetransmits: 0 });
              const other = pc.createDataChannel('other');
              const second = pc.createDataChannel('expressions', { ordered: false, maxRetransmits: 0 });
              m.channels = { first, other, second };
              pc.onicecandidate = (e) => {
                if (e.candidate?.candidate) send({ type: 'ice', to: 'web', mline: e.candidate.sdpMLineIndex ?? 0, candidate: e.candidate.candidate });
              };
              ws.onmessage = async (event) => {
                const message = JSON.parse(event.data);
                m.log.push(message.type + (message.code ? ':' + message.code : ''));
                if (message.type === 'joined') {
                  send({ type: 'offer', to: 'web', sdp: 'v=0\\r\\nthis is not SDP\\r\\n' });
                  send({ type: 'ice', to: 'web', mline: 0, candidate: 'candidate:nonsense' });
                  send({ type: 'ice', to: 'web', mline: 9, candidate: 'candidate:1 1 udp 1 999.1.1.1 1 typ host' });
                  await pc.setLocalDescription(await pc.createOffer());
                  send({ type: 'offer', to: 'web', sdp: pc.localDescription.sdp });
                } else if (message.type === 'answer') {
                  await pc.setRemoteDescription({ type: 'answer', sdp: message.sdp });
                } else if (message.type === 'ice') {
                  try { await pc.addIceCandidate({ candidate: message.candidate, sdpMLineIndex: message.mline }); } catch { /* ignored */ }
                }
              };
              ws.onopen = () => send({ type: 'join', room: 'r9', user: 'mallory', token });
              m.junk = () => {
                for (const channel of [first, second]) {
                  if (channel.readyState !== 'open') continue;
                  channel.send(new Uint8Array(200)); channel.send(new Uint8Array(20).fill(7)); channel.send('not a frame');
                }
              };
              let sequence = 1000;
              m.valid = () => setInterval(() => {
                if (first.readyState === 'open') first.send(wire.encodeFrame({ sequence: sequence++, captureTimeMicros: Math.round(performance.now() * 1000),
                  state: 'tracked', isVoiceDriven: false, expression: wire.neutralExpression() }));
              }, 33);
            })();
            """, [try token("r9", "mallory")])
        XCTAssertTrue(try browser.wait(for: "window.veil.remotes.mallory?.state === 'connected'", timeout: 10), browser.pageState())
        XCTAssertTrue(try mallory.wait(for: "window.__mallory.channels.first.readyState === 'open' && window.__mallory.channels.second.readyState !== 'connecting'", timeout: 5),
                      "\(String(describing: try? mallory.execute("return window.__mallory.log")))")
        try mallory.execute("window.__mallory.junk(); window.__mallory.valid();")
        XCTAssertTrue(try browser.wait(for: "window.veil.remotes.mallory.framesDecoded > 30", timeout: 5), browser.pageState())
        XCTAssertTrue(try browser.wait(for: "window.veil.remotes.mallory.lastSequence > 1020", timeout: 5), "the page stopped drawing: \(browser.pageState())")
        XCTAssertEqual(try browser.execute("return window.veil.remotes.mallory.framesInvalid") as? Int, 3, browser.pageState())
        XCTAssertEqual(try browser.execute("return window.veil.status") as? String, "joined")
        XCTAssertTrue(try mallory.wait(for: "window.__mallory.channels.other.readyState === 'closed'", timeout: 3), "a channel with another label stays open")
        XCTAssertTrue(try mallory.wait(for: "window.__mallory.channels.second.readyState === 'closed'", timeout: 3),
                      "the page left a second expressions channel open")
        XCTAssertEqual(try mallory.execute("return window.__mallory.channels.first.readyState") as? String, "open",
                       "the first channel (the connection) should stay up: \(browser.pageState())")
    }

    /// The page never asks for the camera, and the server's policy forbids it anyway; it works at
    /// phone width; it connects with the browser's default privacy settings (mDNS host names)
    /// when the microphone is refused.
    func testNeverTheCameraPhoneWidthAndMulticastDNSCandidates() throws {
        let (_, carolLog) = try nativeSession(room: "r4", user: "carol")
        XCTAssertTrue(waitUntil(10) { carolLog.joined })
        // No fake-media permission: the microphone request is refused, so Chromium keeps hiding
        // its addresses behind mDNS names, which the native side cannot resolve.
        let browser = try browser(extraArguments: ["--deny-permission-prompts"], fakeMediaPermission: false)
        defer { browser.delete() }
        try openPage(browser, room: "r4", user: "web")
        XCTAssertEqual(try browser.execute("return document.featurePolicy ? document.featurePolicy.allowsFeature('camera') : null") as? Bool, false,
                       "the server's Permissions-Policy forbids the camera")
        let load = try browser.execute("""
            const n = performance.getEntriesByType('navigation')[0];
            return [window.veil.readyMillis, n.loadEventEnd, performance.getEntriesByType('resource').reduce((a, r) => a + (r.transferSize || 0), n.transferSize || 0)];
            """) as? [Double] ?? []
        print("page load: ready to join \(Int(load.first ?? -1)) ms after navigation (rig loaded, modules imported), load event \(Int(load.dropFirst().first ?? -1)) ms, \(Int((load.last ?? 0) / 1024)) KiB transferred")
        XCTAssertLessThan(load.first ?? .infinity, 3000, "the page should be ready to join within 3 s on this machine")
        try browser.driver.request("POST", "session/\(browser.id)/window/rect", ["width": 390, "height": 800])
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.remotes.carol?.state === 'connected'", timeout: 10), browser.pageState())
        XCTAssertTrue(waitUntil(5) { carolLog.frames(from: "web").count > 20 }, "frames should flow over a connection made from mDNS candidates")
        let candidates = try browser.execute("return window.veil.candidatesSent") as? [String] ?? []
        let hosts = candidates.filter { $0.contains(" typ host") }
        print("browser host candidates: \(hosts.map { $0.split(separator: " ")[4] })")
        XCTAssertFalse(hosts.isEmpty)
        XCTAssertTrue(hosts.allSatisfy { $0.split(separator: " ")[4].hasSuffix(".local") }, "Chromium should hide its addresses: \(hosts)")
        // The native side ignored those names and found the browser through its checks.
        XCTAssertTrue(waitUntil(4) { carolLog.latestStatistics?.peers["web"]?.candidatePair != nil })
        let pair = carolLog.latestStatistics?.peers["web"]?.candidatePair
        XCTAssertEqual(pair?.remote.type, .prflx, "the browser should be a peer-reflexive candidate: \(String(describing: pair))")
        let connectMillis = try browser.execute("return window.veil.firstConnectedMillis") as? Double ?? -1
        print("mDNS-only browser: connected \(Int(connectMillis)) ms after Join, selected pair \(pair.map { "\($0.local.type) – \($0.remote.type)" } ?? "none")")
        XCTAssertTrue(ICECandidate.hasMulticastDNSAddress(try XCTUnwrap(hosts.first)))
        XCTAssertFalse(ICECandidate.hasMulticastDNSAddress("candidate:1 1 UDP 2015363327 192.0.2.2 45545 typ host"))
        XCTAssertFalse(ICECandidate.hasMulticastDNSAddress("candidate:1 1 UDP 2015363327 fd00::2 45545 typ host"))
        let message = try browser.execute("return window.veil.callMessage || ''") as? String ?? ""
        XCTAssertTrue(message.contains("microphone"), "the page should say the microphone is unavailable: \(message)")

        // Controls at phone width: everything inside the screen, nothing scrolls sideways.
        let layout = try browser.execute("""
            const controls = [...document.querySelectorAll('.controls button, .controls label:not([hidden])')].map((e) => e.getBoundingClientRect());
            return { scroll: document.documentElement.scrollWidth, width: window.innerWidth, height: window.innerHeight,
                     outside: controls.filter((r) => r.left < 0 || r.right > window.innerWidth || r.bottom > window.innerHeight).length,
                     controls: controls.length };
            """) as? [String: Int] ?? [:]
        XCTAssertLessThanOrEqual(layout["scroll"] ?? 9999, layout["width"] ?? 0, "\(layout)")
        XCTAssertEqual(layout["outside"], 0, "\(layout)")
        XCTAssertGreaterThanOrEqual(layout["controls"] ?? 0, 4)
        try browser.screenshot().write(to: work.appendingPathComponent("phone.png"))

        // Every control, then leave: never a request for video.
        try browser.execute("""
            document.getElementById('mute').click(); document.getElementById('mute').click();
            const corner = document.getElementById('corner'); corner.value = 'top-left'; corner.dispatchEvent(new Event('change'));
            const background = document.getElementById('background');
            if (background.options.length > 1) { background.selectedIndex = 1; background.dispatchEvent(new Event('change')); }
            document.getElementById('leave').click();
            """)
        XCTAssertEqual(try browser.execute("return document.getElementById('self').dataset.corner") as? String, "top-left")
        try assertNeverAskedForVideo(browser, atLeast: 1)
    }

    /// The same user joining from a second tab takes the seat over: the first tab says so and does
    /// not reconnect (they would evict each other). The name carries a '+', which the link keeps.
    func testASecondTabTakesTheSeatOver() throws {
        let browser = try browser()
        defer { browser.delete() }
        try openPage(browser, room: "r5", user: "ana+web")
        XCTAssertEqual(try browser.execute("return document.getElementById('user').value") as? String, "ana+web")
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 5), browser.pageState())
        let first = try XCTUnwrap(browser.windowHandles().first)
        let second = try browser.newTab()
        try browser.switchTo(second)
        try openPage(browser, room: "r5", user: "ana+web")
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 5), browser.pageState())
        try browser.switchTo(first)
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'left'", timeout: 5), browser.pageState())
        let message = try browser.execute("return document.getElementById('message').textContent") as? String ?? ""
        XCTAssertTrue(message.contains("another tab or device"), message)
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(try browser.execute("return window.veil.status") as? String, "left", "the first tab must not reconnect")
        XCTAssertEqual(server.status().participants, 1)
        XCTAssertEqual(server.status().connections, 1)
    }

    /// The server restarts under a call: the page reconnects and rejoins by itself, and voice and
    /// expressions flow again.
    func testThePageRejoinsAfterTheServerRestarts() throws {
        let (carol, carolLog) = try nativeSession(room: "r6", user: "carol")
        let sender = sendExpressions(from: carol, jaw: Jaw(0.3))
        defer { sender.cancel() }
        XCTAssertTrue(waitUntil(10) { carolLog.joined })
        let browser = try browser()
        defer { browser.delete() }
        try openPage(browser, room: "r6", user: "web")
        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.remotes.carol?.state === 'connected'", timeout: 10), browser.pageState())

        let port = try XCTUnwrap(server.port)
        let secret = server.configuration.secret
        server.stop()
        let restartedAt = Date()
        server = RoomServer(configuration: .init(secret: secret, host: "127.0.0.1", port: port, webRoot: Self.webDirectory))
        try server.start()
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined' && window.veil.callMessage && window.veil.callMessage.includes('reconnecting')", timeout: 5),
                      "the page should say it reconnects: \(browser.pageState())")
        XCTAssertTrue(waitUntil(15) { self.server.status().participants == 2 }, "both should be back in the room: \(browser.pageState())")
        let framesBefore = carolLog.frames(from: "web").count
        let decodedBefore = try browser.execute("return window.veil.remotes.carol?.framesDecoded ?? 0") as? Int ?? 0
        XCTAssertTrue(waitUntil(10) { carolLog.frames(from: "web").count > framesBefore + 30 }, "frames from the page should flow again")
        XCTAssertTrue(try browser.wait(for: "(window.veil.remotes.carol?.framesDecoded ?? 0) > \(decodedBefore + 30)", timeout: 10), browser.pageState())
        print("server restart: both back in the room and frames flowing \(String(format: "%.1f", Date().timeIntervalSince(restartedAt))) s later")
    }

    // MARK: - The page

    /// A browser whose pages all run `probeScript` first.
    private func browser(audioFile: URL? = nil, extraArguments: [String] = [], fakeMediaPermission: Bool = true) throws -> BrowserSession {
        let browser = try driver.session(audioFile: audioFile, extraArguments: extraArguments, fakeMediaPermission: fakeMediaPermission)
        do {
            try browser.addScriptAtDocumentStart(Self.probeScript)
        } catch {
            browser.delete()
            throw error
        }
        return browser
    }

    /// Loads the page afresh from a link carrying room, user and token.
    private func openPage(_ browser: BrowserSession, room: String, user: String, token: String? = nil) throws {
        try browser.navigate(URL(string: "about:blank")!)
        let token = try token ?? self.token(room, user)
        var fragment = URLComponents()
        fragment.queryItems = [.init(name: "room", value: room), .init(name: "user", value: user), .init(name: "token", value: token)]
        let page = try XCTUnwrap(server.pageURL)
        try browser.navigate(URL(string: page.absoluteString + "#" + (fragment.percentEncodedQuery ?? ""))!)
        XCTAssertTrue(try browser.wait(for: "window.veil && window.veil.ready", timeout: 10), "the page did not start: \(browser.consoleLog())")
    }

    /// Per remote participant: audio packets and bytes, analyser level, frames decoded and invalid.
    private func remoteFigures(_ browser: BrowserSession) throws -> [String: [String: Double]] {
        let value = try browser.execute("""
            const out = {};
            for (const [user, r] of Object.entries(window.veil.remotes)) out[user] = { audioPackets: r.audioPackets || 0,
              audioBytes: r.audioBytes || 0, audioLevel: r.audioLevel || 0, framesDecoded: r.framesDecoded, framesInvalid: r.framesInvalid };
            return out;
            """) as? [String: [String: Any]] ?? [:]
        return value.mapValues { $0.compactMapValues { ($0 as? NSNumber)?.doubleValue } }
    }

    /// Keeps the pixels of `user`'s tile in the page under `name`.
    private func capture(_ browser: BrowserSession, user: String, as name: String) throws {
        try browser.execute("""
            const [user, name] = arguments;
            const canvas = document.querySelector(`figure.tile[data-user="${user}"] canvas`);
            const image = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
            (window.__captures = window.__captures || {})[name] = { w: canvas.width, h: canvas.height, data: image.data };
            """, [user, name])
    }

    /// The fraction of pixels in `region` (fractions of the tile: x0, y0, x1, y1) that differ
    /// visibly between two captures.
    private func difference(_ browser: BrowserSession, _ a: String, _ b: String, region: (Double, Double, Double, Double)) throws -> Double {
        let value = try browser.execute("""
            const [a, b, x0, y0, x1, y1] = arguments;
            const A = window.__captures[a], B = window.__captures[b];
            if (!A || !B || A.w !== B.w || A.h !== B.h || A.w === 0) return -1;
            let differing = 0, total = 0;
            for (let y = Math.floor(y0 * A.h); y < Math.floor(y1 * A.h); y++) {
              for (let x = Math.floor(x0 * A.w); x < Math.floor(x1 * A.w); x++) {
                const i = (y * A.w + x) * 4;
                total++;
                if (Math.abs(A.data[i] - B.data[i]) + Math.abs(A.data[i + 1] - B.data[i + 1]) + Math.abs(A.data[i + 2] - B.data[i + 2]) > 48) differing++;
              }
            }
            return differing / Math.max(total, 1);
            """, [a, b, region.0, region.1, region.2, region.3])
        let fraction = (value as? NSNumber)?.doubleValue ?? -1
        XCTAssertGreaterThanOrEqual(fraction, 0, "captures \(a) and \(b) could not be compared")
        return fraction
    }

    /// Mean absolute difference (0…255, over RGB) between `user`'s tile as the page drew it and the
    /// Swift renderer's drawing of a resting face with `jawOpen` (mask style, gradient background:
    /// the page's defaults), over the whole tile and around the mouth; and the share of pixels off by more than 48.
    private func compareWithSwiftRenderer(_ browser: BrowserSession, user: String, jawOpen: Float) throws -> (Double, Double, Double) {
        let value = try browser.execute("""
            const c = document.querySelector(`figure.tile[data-user="${arguments[0]}"] canvas`);
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const rgb = new Uint8Array(c.width * c.height * 3);
            for (let i = 0, j = 0; i < d.length; i += 4) { rgb[j++] = d[i]; rgb[j++] = d[i + 1]; rgb[j++] = d[i + 2]; }
            let text = '';
            for (let i = 0; i < rgb.length; i += 8192) text += String.fromCharCode.apply(null, rgb.subarray(i, i + 8192));
            return [c.width, c.height, btoa(text), document.getElementById('background').value];
            """, [user]) as? [Any] ?? []
        let width = try XCTUnwrap(value.first as? Int), height = try XCTUnwrap(value[1] as? Int)
        let page = [UInt8](try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(value[2] as? String))))
        XCTAssertEqual(value[3] as? String, "gradient")
        var expression = Expression.neutral
        expression[.jawOpen] = jawOpen
        let canvas = try CairoCanvas(width: width, height: height)
        let rect = Rect(x: 0, y: 0, width: Float(width), height: Float(height))
        AvatarRenderer().render(expression, into: canvas, rect: rect, style: .mask, background: .gradient)
        let swift = canvas.rgbImage().pixels
        XCTAssertEqual(swift.count, page.count)
        let lips = AvatarRig.canonical.pose(for: expression, in: rect).bounds(of: .outerLips)
        var total = 0.0, mouth = 0.0, mouthCount = 0, strong = 0
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3
                let delta = (0..<3).reduce(0) { $0 + abs(Int(swift[i + $1]) - Int(page[i + $1])) }
                total += Double(delta) / 3
                if delta > 48 { strong += 1 }
                if Float(x) >= lips.x - 6, Float(x) <= lips.x + lips.width + 6, Float(y) >= lips.y - 6, Float(y) <= lips.y + lips.height + 6 {
                    mouth += Double(delta) / 3
                    mouthCount += 1
                }
            }
        }
        let pixels = Double(max(width * height, 1))
        return (total / pixels, mouth / Double(max(mouthCount, 1)), Double(strong) / pixels)
    }

    private func assertNeverAskedForVideo(_ browser: BrowserSession, atLeast: Int = 1, line: UInt = #line) throws {
        let requests = try browser.execute("return window.__veilProbe.getUserMedia") as? [String] ?? []
        XCTAssertGreaterThanOrEqual(requests.count, atLeast, "the page should ask for the microphone", line: line)
        for request in requests {
            let constraints = try JSONSerialization.jsonObject(with: Data(request.utf8)) as? [String: Any] ?? [:]
            XCTAssertNotNil(constraints["audio"], request, line: line)
            let video = constraints["video"]
            XCTAssertTrue(video == nil || (video as? Bool) == false, "the page asked for video: \(request)", line: line)
        }
    }

    // MARK: - Native participants

    private func token(_ room: String, _ user: String) throws -> String {
        try authority.issue(room: room, user: user, lifetime: 600)
    }

    /// A native participant joining `room` as `user` (a test tone for a voice), started, with a
    /// recorder of its events and the frames it receives.
    private func nativeSession(room: String, user: String) throws -> (CallSession, EventRecorder) {
        let session = CallSession(configuration: .init(server: try XCTUnwrap(server.webSocketURL), room: room, user: user,
                                                       token: try token(room, user), audioInput: .testTone(frequency: 440), statisticsInterval: 1))
        sessions.append(session)
        let log = EventRecorder(session)
        session.start()
        return (session, log)
    }

    private func awaitLeave(_ session: CallSession) {
        let done = DispatchSemaphore(value: 0)
        Task.detached { await session.leave(); done.signal() }
        _ = done.wait(timeout: .now() + 5)
    }

    /// ~30 frames/s from `session`: a resting face with the jaw at `jaw`'s current value.
    private func sendExpressions(from session: CallSession, jaw: Jaw) -> Task<Void, Never> {
        Task.detached {
            var sequence: UInt32 = 0
            while !Task.isCancelled {
                var expression = Expression.neutral
                expression[.jawOpen] = jaw.value
                session.send(ExpressionFrame(sequence: sequence, captureTimeMicros: session.mediaTimeMicros, state: .tracked, expression: expression))
                sequence &+= 1
                try? await Task.sleep(nanoseconds: 33_000_000)
            }
        }
    }

    /// A talking-face clip to act as `veil call`'s camera.
    private func makeCameraClip() throws -> URL {
        let photo = try VeilResources.file("photos", "takeo.ppm")
        let clip = work.appendingPathComponent("face.mp4")
        let synth = try veil(["synth", photo.path, "-o", clip.path, "--quiet"])
        synth.process.waitUntilExit()
        XCTAssertEqual(synth.process.terminationStatus, 0, "veil synth failed")
        return clip
    }

    /// Speech with pauses (espeak-ng) as the browser's microphone; nil (Chromium's beeping fake
    /// microphone) without espeak-ng.
    private func makeSpeech() -> URL? {
        let wav = work.appendingPathComponent("speech.wav")
        let espeak = Process()
        espeak.executableURL = URL(fileURLWithPath: "/usr/bin/espeak-ng")
        espeak.arguments = ["-w", wav.path, "-s", "150", "Hello there. Can you hear me? This is the browser speaking, with pauses. One, two, three."]
        espeak.standardOutput = FileHandle.nullDevice
        espeak.standardError = FileHandle.nullDevice
        guard (try? espeak.run()) != nil else { return nil }
        espeak.waitUntilExit()
        return espeak.terminationStatus == 0 ? wav : nil
    }

    final class Child: Sendable {
        nonisolated(unsafe) let process: Process
        let collected = Mutex(Data())
        /// When each complete line of output arrived.
        private let arrivals = Mutex<[Date]>([])
        init(process: Process) { self.process = process }
        func output() -> String { String(decoding: collected.withLock { $0 }, as: UTF8.self) }

        func append(_ data: Data) {
            collected.withLock { $0.append(data) }
            let now = Date()
            arrivals.withLock { $0 += Array(repeating: now, count: data.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }) }
        }

        /// The complete lines of output so far, each with when it arrived.
        func timedLines() -> [(arrived: Date, line: String)] {
            let text = output()
            let times = arrivals.withLock { $0 }
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
            return Array(zip(times, lines))
        }

        /// Its `--json` events, each with when it arrived.
        func events() -> [(arrived: Date, event: [String: Any])] {
            timedLines().compactMap { arrived, line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]).map { (arrived, $0) }
            }
        }
    }

    /// `veil args` as a child process (the executable built next to the tests), headless, its
    /// standard output collected; ended in `tearDown` if still running.
    private func veil(_ args: [String]) throws -> Child {
        var environment: [String: String?] = ["DISPLAY": nil, "PULSE_SERVER": nil]
        if let cache = VeilResources.cacheDirectory { environment["VEIL_CACHE"] = cache.path }
        let process = TestProgram.process(try XCTUnwrap(TestProgram.built("veil"), "the veil executable is not built next to the tests"),
                                          args, in: work, environment: environment)
        let pipe = Pipe()
        let child = Child(process: process)
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil } else { child.append(data) }
        }
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        children.append(process)
        return child
    }

}

/// How far the in-process participant's jaw is open (0…1), changed by the test while frames go out.
final class Jaw: Sendable {
    private let state: Mutex<Float>
    init(_ value: Float = 0) { state = Mutex(value) }
    var value: Float {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// A native session's events and the frames it received, collected as they come.
final class EventRecorder: @unchecked Sendable {
    private let state = Mutex<(events: [CallSession.Event], frames: [(String, ExpressionFrame)])>(([], []))
    private var tasks: [Task<Void, Never>] = []

    init(_ session: CallSession) {
        tasks.append(Task.detached { [weak self] in
            for await event in session.events { self?.state.withLock { $0.events.append(event) } }
        })
        tasks.append(Task.detached { [weak self] in
            for await received in session.expressionFrames { self?.state.withLock { $0.frames.append((received.user, received.frame.frame)) } }
        })
    }

    deinit { tasks.forEach { $0.cancel() } }

    var events: [CallSession.Event] { state.withLock { $0.events } }
    var joined: Bool { events.contains { if case .joined = $0 { true } else { false } } }
    var latestStatistics: CallSession.CallStatistics? {
        events.reversed().lazy.compactMap { if case .statistics(let s) = $0 { s } else { nil } }.first
    }
    func frames(from user: String) -> [ExpressionFrame] { state.withLock { $0.frames.filter { $0.0 == user }.map(\.1) } }
    func clear() { state.withLock { $0.events.removeAll() } }
}
