import Foundation
import Synchronization
import VeilCairo
import VeilCall
import VeilCore
import VeilVision
import VeilMedia
import VeilRender
import VeilConsole
import VeilInterop
import VeilInteropNetwork
import VeilExpressionSource
import VeilCameraSource

/// Runs one participant of a call from the command line: an `ExpressionSource` (camera or video →
/// tracker, `CameraExpressionSource`; or a VMC or Live Link Face sender, `InteropFaceSource`) →
/// expression frames out, and to any `--send` destination (made from the voice instead when there
/// is no camera or the face is out of view, see `ExpressionSender`); remote expressions and voices
/// in → picture-in-picture view → window or file.
final class CallRunner: @unchecked Sendable {
    enum Output { case window, file(String), none }
    enum Control: Equatable { case toggleMute, cycleAudioOutput, cycleBackground, cycleLayout, toggleCompactWindow, leave }

    struct Options {
        var server: URL
        var room: String
        var user: String
        var token: String
        /// Whom a wss:// server's certificate must be vouched for by (--ca-file).
        var serverTrust = ServerTrust.system
        /// A camera (/dev/videoN) or a video file (played in real time, looped); nil: no camera, the
        /// avatar follows the voice.
        var video: String?
        /// The face from a VMC Performer or the Live Link Face app instead of a camera (`--face`):
        /// the port to listen on, and the sender to accept (any, the first, when the host is empty).
        var face: InteropEndpoint?
        /// Where each frame sent from the face also goes (`--send`): VMC Marionettes, Unreal.
        var sends: [InteropEndpoint] = []
        var audioIn: AudioInput = .silence
        var audioOut: AudioOutput = .discard
        /// How much of the face's own way of moving the expressions sent carry (docs/privacy.md).
        var privacy = PrivacyLevel.default
        /// STUN/TURN settings (the room server's `--ice-server` fills what is not set here).
        var peer = PeerConfiguration()
        var output: Output = .none
        var size: (width: Int, height: Int) = (640, 480)
        var style: AvatarStyle = .mask
        var backgrounds: [AvatarBackground] = [AvatarBackground.default, .solid(Color(white: 0.12)), .none]
        var duration: TimeInterval?
        var json = false
        var quiet = false
        /// Controls applied at times (seconds from the start), for scripted runs such as the demo.
        var schedule: [(at: TimeInterval, control: Control)] = []
    }

    /// What a run measured.
    struct Report: Codable {
        var user: String
        var joinMilliseconds: Double?
        var roundTripMillis: Double?
        var lossFraction: Double?
        var expressionFramesPerSecondSent: Double = 0
        var expressionFramesPerSecondReceived: Double = 0
        var expressionBytesPerSecond: Double = 0
        var audioBitsPerSecond: Double = 0
        var largestExpressionPayload = 0
        var lipSyncOffsetsMillis: [Double] = []
        var framesRendered = 0
        var framesTracked = 0
        var events: [String] = []
        var candidatePair: String?
        var quality: String?
        var outboundStreamKinds: [String] = []
        var nonAudioBytesSent = 0
        var audioBytesSent = 0
        var expressionBytesSent = 0
        /// Frames sent from the camera, and made from the voice (over all participants).
        var cameraFramesSent = 0
        var voiceFramesSent = 0
        /// Frames received, and how many of them were voice-driven.
        var expressionFramesReceived = 0
        var voiceDrivenFramesReceived = 0
        /// What each `--send` destination was sent.
        var destinations: [InteropDestinations.Summary] = []
        /// With `--face`: datagrams received, expressions read, frames given, bad input by kind.
        var face: InteropFaceSource.Statistics?
    }

    let options: Options
    let session: CallSession
    private let controls = Mutex<[Control]>([])
    private let report: Mutex<Report>
    private let running = Mutex(true)
    private let failed = Mutex<String?>(nil)
    /// Camera frames or voice-driven ones out (see `ExpressionSender`).
    let sender: ExpressionSender
    /// `--send` destinations; used only by the capture's thread once the call runs.
    private var interopSenders: [InteropSender] = []

    /// The others' voices, mixed for the recording.
    private let mixer = AudioMixer()

    init(options: Options) {
        self.options = options
        // When recording what this participant hears, the voices go to the recording (unless
        // they are to be played on the sound server).
        var output = options.audioOut
        let mixer = self.mixer
        if case .file = options.output, case .discard = options.audioOut {
            output = .callback { audio in mixer.add(audio.samples, at: audio.playoutTimeMicros) }
        }
        let chosen = output
        var configuration = CallSession.Configuration(server: options.server, room: options.room, user: options.user,
                                                      token: options.token, audioInput: options.audioIn,
                                                      audioOutput: { _ in chosen }, peer: options.peer)
        configuration.serverTrust = options.serverTrust
        session = CallSession(configuration: configuration)
        report = Mutex(Report(user: options.user))
        sender = ExpressionSender(session: session, hasCamera: options.video != nil || options.face != nil,
                                  seed: VoiceExpressionGenerator.seed(for: options.user))
    }

    /// Asks the running call to do something (from a key press or a schedule).
    func apply(_ control: Control) { controls.withLock { $0.append(control) } }

    /// Runs until the duration ends, the call is left, or it fails; returns what it measured.
    func run() throws -> Report {
        try PeerConnection.prepare()
        // Opened before the call starts, so that a bad destination or a port in use ends the run at once.
        interopSenders = try InteropDestinations.open(options.sends, framesPerSecond: 30)
        var faceSource: InteropFaceSource?
        if let face = options.face {
            var configuration = InteropFaceSource.Configuration(endpoint: face)
            configuration.privacy = options.privacy
            configuration.log = { [self] line in emit(["event": "faceSource", "message": line], human: line) }
            do {
                faceSource = try InteropFaceSource(configuration: configuration, clock: { [session] in session.mediaTimeMicros })
            } catch {
                throw VeilError.invalidInput("--face \(face): \(error)")
            }
        }
        if !interopSenders.isEmpty, !options.json, !options.quiet {
            Terminal.note("sending your expressions to \(InteropDestinations.targets(interopSenders))")
        }
        if let faceSource, !options.json, !options.quiet {
            let from = faceSource.expectedSenders.isEmpty ? "the first sender" : faceSource.expectedSenders.map(\.description).sorted().joined(separator: " or ")
            Terminal.note("your face comes from \(faceSource.configuration.endpoint.kind.displayName) on port \(faceSource.localAddress.port), from \(from)")
        }
        let started = session.mediaTimeMicros
        Task { [self] in
            for await event in session.events {
                let line = describe(event)
                if options.json { print(line.json); fflush(stdout) } else if !options.quiet, let text = line.human { Terminal.note(text) }
                report.withLock { r in
                    r.events.append(line.json)
                    if case .joined = event, r.joinMilliseconds == nil { r.joinMilliseconds = Double(session.mediaTimeMicros - started) / 1000 }
                    if case .statistics(let s) = event, let peer = s.peers.values.first {
                        r.roundTripMillis = peer.roundTripTimeMillis ?? r.roundTripMillis
                        r.lossFraction = peer.lossFraction ?? r.lossFraction
                        r.expressionFramesPerSecondSent = peer.expression.framesSentPerSecond
                        r.expressionFramesPerSecondReceived = peer.expression.framesReceivedPerSecond
                        r.expressionBytesPerSecond = peer.expression.bytesSentPerSecond
                        r.audioBitsPerSecond = peer.audioBitrateOut
                        r.largestExpressionPayload = max(r.largestExpressionPayload, peer.expression.largestPayloadReceived)
                        r.candidatePair = peer.candidatePair.map { "\($0.local) ↔ \($0.remote)" }
                        r.quality = s.quality.description
                        r.outboundStreamKinds = peer.outboundStreamKinds
                        r.nonAudioBytesSent = peer.nonAudioBytesSent
                        r.audioBytesSent = peer.audioBytesSent
                        r.expressionBytesSent = peer.expression.bytesSent
                    }
                }
                if case .error("certificate", let message) = event { failed.withLock { $0 = message } }
                if case .connection(.failed) = event { failed.withLock { $0 = $0 ?? "the call failed" } }
                if case .error("replaced", _) = event {
                    failed.withLock { $0 = "\(options.user) joined \(options.room) from somewhere else, which took this call over" }
                }
            }
        }
        Task { [self] in
            for await (_, received) in session.expressionFrames {
                report.withLock { r in
                    r.expressionFramesReceived += 1
                    if received.frame.isVoiceDriven { r.voiceDrivenFramesReceived += 1 }
                }
            }
        }
        session.start()
        sender.start()

        // Capture: the camera or video, tracked on a thread of its own; or the face source's thread.
        var source: ExpressionSource? = faceSource
        if let video = options.video {
            source = try CameraExpressionSource(path: video, privacy: options.privacy, clock: { [session] in session.mediaTimeMicros })
        }
        source?.start(voiceMouth: { [sender] in sender.voiceMouth }) { [self] frame in sendCaptured(frame) }

        // Output: window or file, at 30 fps, with the received voices mixed in when recording.
        let width = options.size.width, height = options.size.height
        let canvas = try CairoCanvas(width: width, height: height)
        let renderer = AvatarRenderer()
        var image = RGBImage(width: width, height: height)
        var writer: VideoWriter?
        var display: VideoDisplay?
        switch options.output {
        case .file(let path):
            try createParent(of: path)
            writer = try VideoWriter(url: URL(fileURLWithPath: path), width: width, height: height, framesPerSecond: 30,
                                     audio: AudioTrackFormat(sampleRate: 48_000, channels: 1))
        case .window:
            display = try VideoDisplay(title: "Veil — \(options.user) in \(options.room)", width: width, height: height)
        case .none:
            break
        }
        var backgroundIndex = 0
        var layout: CompositorLayout = .pictureInPicture
        let corners: [Corner] = [.bottomRight, .bottomLeft, .topLeft, .topRight]
        var cornerIndex = 0
        var schedule = options.schedule
        // Who is shown voice-driven (announced when it changes), and what drives our own avatar.
        var voiceDriven: [String: Bool] = [:]
        var ownSource: VoiceFallback.Source?
        let tick: UInt64 = 33_333
        var next = session.mediaTimeMicros
        let end = options.duration.map { started + UInt64($0 * 1e6) }
        while running.withLock({ $0 }) {
            let now = session.mediaTimeMicros
            if let end, now >= end { break }
            if failed.withLock({ $0 }) != nil { break }
            while let first = schedule.first, now >= started + UInt64(first.at * 1e6) {
                apply(first.control); schedule.removeFirst()
            }
            for control in controls.withLock({ c in defer { c = [] }; return c }) {
                switch control {
                case .toggleMute: session.setMuted(!session.isMuted)
                case .cycleAudioOutput: switchAudioOutput()
                case .cycleBackground: backgroundIndex = (backgroundIndex + 1) % options.backgrounds.count
                case .cycleLayout:
                    cornerIndex = (cornerIndex + 1) % (corners.count + 1)
                    layout = cornerIndex < corners.count ? .pictureInPicture(corner: corners[cornerIndex], insetFraction: 0.25, margin: 12) : .grid
                case .toggleCompactWindow:
                    guard let window = display else { Terminal.note("t: the compact window needs --out window"); break }
                    let compact = !window.isCompact
                    let onTop = (try? window.setCompact(compact)) ?? false
                    Terminal.note(compact ? "compact window\(onTop ? ", kept on top" : " (this display's window cannot be kept on top)")" : "full window")
                case .leave: running.withLock { $0 = false }
                }
            }
            // Remote avatars fill the view (a grid for several), our own is the inset.
            let background = options.backgrounds[backgroundIndex]
            let remotes = session.participants
            var views: [CompositorView] = []
            var lipSync: [Double] = []
            let source = sender.source
            if source != ownSource {
                ownSource = source
                emit(["event": "expressionSource", "source": source == .voice ? "voice" : "camera"],
                     human: source == .voice ? (options.face.map { "nothing from \($0.kind.displayName): your avatar follows your voice" }
                                                ?? (options.video == nil ? "no camera: your avatar follows your voice"
                                                                         : "your face is out of view: your avatar follows your voice"))
                                             : "your avatar follows your face")
            }
            for user in remotes {
                guard let playout = session.playout(for: user, at: now) else { continue }
                // Lip-sync: the audio being played (sender media time, through the RTCP-derived
                // playout mapping) against the capture time of the received frame that weighs most
                // in the picture drawn (interpolation itself would always read 0).
                if playout.source == .frame || playout.source == .interpolated, !session.isMuted(user),
                   let used = [playout.earlier, playout.later].compactMap({ $0 }).max(by: { $0.weight < $1.weight }) {
                    lipSync.append(Double(LipSync.audioLeadMicros(audioMediaTimeMicros: playout.mediaTimeMicros,
                                                                  sourceTimeMicros: used.captureTimeMicros)) / 1000)
                }
                // Voice-driven: the dominant frame came from the voice (and there is a face to show).
                let isVoice = playout.isVoiceDriven && playout.faceWeight > 0.5
                if voiceDriven[user] != isVoice, isVoice || voiceDriven[user] != nil {
                    emit(["event": "voiceDriven", "user": user, "voiceDriven": isVoice],
                         human: isVoice ? "\(user)'s avatar follows their voice (no face from their camera)" : "\(user)'s avatar no longer follows their voice")
                }
                voiceDriven[user] = isVoice
                views.append(CompositorView(expression: playout.expression,
                                            label: Self.label(user, muted: session.isMuted(user), voiceDriven: isVoice),
                                            style: options.style, background: background))
            }
            for user in voiceDriven.keys where !remotes.contains(user) { voiceDriven[user] = nil }
            let mine = sender.ownExpression(at: now)
            let me = CompositorView(expression: mine.expression,
                                    label: Self.label("you", muted: session.isMuted, voiceDriven: mine.isVoiceDriven),
                                    style: options.style, background: background)
            if views.isEmpty {
                Compositor(layout: .grid).render([me], with: renderer, into: canvas)
            } else if views.count == 1, case .pictureInPicture = layout {
                Compositor(layout: layout).render(views + [me], with: renderer, into: canvas)
            } else {
                Compositor(layout: .grid).render(views + [me], with: renderer, into: canvas)
            }
            canvas.copy(into: &image)
            if let writer {
                try writer.write(image, at: now - started)
                // Voices are written once they are 300 ms old, so late buffers still make the mix.
                if now > started + 300_000, let chunk = mixer.drain(before: now - 300_000), chunk.timeMicros >= started {
                    try writer.write(audio: chunk.samples, at: chunk.timeMicros - started)
                }
            }
            if let display { try? display.show(image) }
            report.withLock { r in r.framesRendered += 1; r.lipSyncOffsetsMillis.append(contentsOf: lipSync) }
            next += tick
            let after = session.mediaTimeMicros
            if next > after { Thread.sleep(forTimeInterval: Double(next - after) / 1e6) } else { next = after }
        }
        running.withLock { $0 = false }
        // The capture ends before the counters are read: the interop senders are its thread's.
        source?.stop()
        sender.stop()
        report.withLock { r in
            r.cameraFramesSent = sender.statistics.cameraFrames
            r.voiceFramesSent = sender.statistics.voiceFrames
            r.destinations = interopSenders.map(InteropDestinations.Summary.init)
            r.face = faceSource?.statistics
        }
        let left = DispatchSemaphore(value: 0)
        Task { [session] in await session.leave(); left.signal() }
        _ = left.wait(timeout: .now() + 5)
        try writer?.finish()
        display?.close()
        if let failure = failed.withLock({ $0 }) { throw VeilError.io(failure) }
        return report.withLock { $0 }
    }

    /// A frame from the capture (camera or `--face`), on the capture's thread: sent on the call and,
    /// when it went out there, to every `--send` destination (which sends nothing for a lost one).
    private func sendCaptured(_ frame: ExpressionFrame) {
        if sender.send(cameraFrame: frame) {
            for destination in interopSenders { destination.send(frame) }
        }
        if frame.state == .tracked { report.withLock { $0.framesTracked += 1 } }
    }

    /// A view's label: the name, whether muted, and whether the avatar is driven by the voice.
    static func label(_ name: String, muted: Bool, voiceDriven: Bool) -> String {
        name + (muted ? " (muted)" : "") + (voiceDriven ? " · voice" : "")
    }

    /// An event as a JSON line with `--json`, otherwise `human` as a note unless `--quiet`.
    private func emit(_ fields: [String: Any], human: String) {
        if options.json {
            let line = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            print(line)
            fflush(stdout)
        } else if !options.quiet {
            Terminal.note(human)
        }
    }

    /// The `s` key: the others' voices move to the sound server's next sink (sinks in name order,
    /// wrapping around), and the sink now playing is announced; with one sink or no sound server,
    /// that is said instead. Asking the server blocks for milliseconds, on the render thread.
    private func switchAudioOutput() {
        guard case .pulse(let configured) = options.audioOut else {
            return announce("audio output: the voices do not go to the sound server; start with --audio-out pulse to switch sinks",
                            ["switched": false, "reason": "notPulse"])
        }
        let sinks: [AudioDevice]
        do { sinks = try session.audioOutputDevices() } catch {
            return announce("audio output: \(error)", ["switched": false, "reason": "\(error)"])
        }
        guard sinks.count > 1 else {
            if let only = sinks.first {
                return announce("audio output: \(only.description) (\(only.name)) is the only sink; nothing to switch to",
                                ["switched": false, "reason": "oneSink", "device": only.name])
            }
            return announce("audio output: no sound server answers; nothing to switch to", ["switched": false, "reason": "noSoundServer"])
        }
        let current = session.audioOutputDevice ?? configured ?? sinks.first(where: \.isDefault)?.name
        let index = ((sinks.firstIndex { $0.name == current } ?? -1) + 1) % sinks.count
        let next = sinks[index]
        do {
            try session.setAudioOutputDevice(next.name)
            let kind = next.formFactor.map { ", a \($0)" } ?? ""
            announce("audio output: \(next.description) (sink \(next.name)\(kind); \(index + 1) of \(sinks.count))",
                     ["switched": true, "device": next.name, "description": next.description])
        } catch {
            announce("audio output: \(error)", ["switched": false, "reason": "\(error)"])
        }
    }

    /// A control's outcome: a JSON line with `--json`, otherwise a note unless `--quiet`.
    private func announce(_ text: String, _ fields: [String: Any]) {
        if options.json {
            var fields = fields
            fields["event"] = "audioOutput"
            let line = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            print(line)
            fflush(stdout)
        } else if !options.quiet {
            Terminal.note(text)
        }
    }
}

/// An event as a JSON line and, when worth telling a person, a sentence.
private func describe(_ event: CallSession.Event) -> (json: String, human: String?) {
    func json(_ fields: [String: Any]) -> String {
        (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
    switch event {
    case .connection(let state):
        return (json(["event": "connection", "state": state.rawValue]), "connection: \(state.rawValue)")
    case .joined(let participants, let resumed):
        let names = participants.map(\.user)
        return (json(["event": "joined", "participants": names, "resumed": resumed]),
                "\(resumed ? "rejoined" : "joined"); in the room: \(names.isEmpty ? "nobody yet" : names.joined(separator: ", "))")
    case .participantJoined(let user):
        return (json(["event": "participantJoined", "user": user]), "\(user) joined")
    case .participantLeft(let user, let reason):
        return (json(["event": "participantLeft", "user": user, "reason": reason.rawValue]), "\(user) left (\(reason.rawValue))")
    case .muteChanged(let user, let muted):
        return (json(["event": "muteChanged", "user": user, "muted": muted]), "\(user) \(muted ? "muted" : "unmuted")")
    case .peerState(let user, let state):
        return (json(["event": "peerState", "user": user, "state": state.rawValue]), state == .connected ? "connected to \(user)" : nil)
    case .peerRecovering(let user, let attempt):
        return (json(["event": "peerRecovering", "user": user, "attempt": attempt]),
                "the connection to \(user) broke; reconnecting (attempt \(attempt))")
    case .peerRecovered(let user):
        return (json(["event": "peerRecovered", "user": user]), "the connection to \(user) is back")
    case .error(let code, let message):
        return (json(["event": "error", "code": code, "message": message]), "error \(code): \(message)")
    case .statistics(let s):
        var peers: [[String: Any]] = []
        for (user, p) in s.peers.sorted(by: { $0.key < $1.key }) {
            var entry: [String: Any] = ["user": user, "state": p.state.rawValue, "quality": p.quality.description,
                                        "audioBitrateIn": p.audioBitrateIn, "audioBitrateOut": p.audioBitrateOut,
                                        "expressionFramesPerSecond": p.expression.framesReceivedPerSecond,
                                        "expressionBytesPerSecond": p.expression.bytesSentPerSecond]
            if let rtt = p.roundTripTimeMillis { entry["rttMillis"] = rtt }
            if let loss = p.lossFraction { entry["loss"] = loss }
            if let jitter = p.jitterMillis { entry["jitterMillis"] = jitter }
            // The received voice's playout since the start (samples at 48 kHz).
            entry["playoutTargetMillis"] = Double(p.playout.targetDelayMicros) / 1000
            entry["playoutDelayMillis"] = Double(p.playout.currentDelayMicros) / 1000
            entry["audioConcealedSeconds"] = Double(p.playout.concealedSamples) / 48_000
            entry["audioStretchedSeconds"] = Double(p.playout.acceleratedSamples + p.playout.expandedSamples) / 48_000
            entry["audioLateChunks"] = p.playout.lateChunks
            if let pair = p.candidatePair {
                entry["local"] = "\(pair.local.address):\(pair.local.port) (\(pair.local.type.rawValue))"
                entry["remote"] = "\(pair.remote.address):\(pair.remote.port) (\(pair.remote.type.rawValue))"
            }
            peers.append(entry)
        }
        let human = s.peers.sorted(by: { $0.key < $1.key }).map { user, p in
            "\(user): \(p.quality), rtt \(p.roundTripTimeMillis.map { String(format: "%.1f ms", $0) } ?? "-"), loss \(p.lossFraction.map { String(format: "%.1f %%", $0 * 100) } ?? "-"), expressions \(String(format: "%.0f", p.expression.framesReceivedPerSecond))/s"
        }.joined(separator: "; ")
        return (json(["event": "statistics", "quality": s.quality.description, "peers": peers]), human.isEmpty ? nil : human)
    }
}
