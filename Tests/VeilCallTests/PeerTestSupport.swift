import Foundation
import Synchronization
import VeilBench
@testable import VeilCall
import VeilCore
import VeilGLib
import XCTest

/// A wait that took too long: the test fails instead of hanging.
struct DeadlineExceeded: Error, CustomStringConvertible {
    let description: String
}

/// Polls `condition` every 10 ms until it holds; throws after `seconds` (10 s by default).
func eventually(_ what: String, within seconds: Double = 10, _ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        guard Date() < deadline else { throw DeadlineExceeded(description: "timed out after \(seconds) s waiting for \(what)") }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
}

/// Runs `body` and throws if it has not finished after `seconds`.
func withDeadline<T: Sendable>(_ what: String, seconds: Double = 10, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw DeadlineExceeded(description: "\(what) did not finish within \(seconds) s")
        }
        return value
    }
}

/// What one side of a test call saw.
final class PeerRecorder: Sendable {
    let events = Mutex<[PeerEvent]>([])
    let frames = Mutex<[ReceivedExpressionFrame]>([])
    let audio = Mutex<[ReceivedAudio]>([])
    /// The media time at which each `audio` buffer was handed over (its actual playout time).
    let heardMicros = Mutex<[UInt64]>([])
    let streamsEnded = Mutex(0)
    let descriptions = Mutex<[SessionDescription]>([])
    /// The ICE candidates this side trickled to the other.
    let candidates = Mutex<[String]>([])
    /// Errors this side threw when handed the other side's signaling.
    let rejected = Mutex<[PeerError]>([])

    var states: [PeerConnection.State] {
        events.withLock { $0.compactMap { if case .connectionState(let state) = $0 { state } else { nil } } }
    }
    var failures: [PeerError] {
        events.withLock { $0.compactMap { if case .failure(let error) = $0 { error } else { nil } } }
    }
    var channelOpened: Bool {
        events.withLock { $0.contains { if case .dataChannelOpened = $0 { true } else { false } } }
    }

    func hear(_ audio: ReceivedAudio) {
        let now = PeerConnection.mediaTimeMicros
        self.audio.withLock { $0.append(audio) }
        heardMicros.withLock { $0.append(now) }
    }

    /// Audio received after `micros` (receiver media time), concatenated.
    func samples(after micros: UInt64 = 0, before end: UInt64 = .max) -> [Float] {
        audio.withLock { $0.filter { $0.playoutTimeMicros >= micros && $0.playoutTimeMicros < end }.flatMap(\.samples) }
    }
}

/// Two real peers in one process, their signaling passed directly from one to the other.
final class PeerPair: @unchecked Sendable {
    // Immutable after init; the recorders and connections are themselves thread-safe.
    let loop: GLibLoop
    let offerer: PeerConnection
    let answerer: PeerConnection
    let offererSaw = PeerRecorder()
    let answererSaw = PeerRecorder()
    private var tasks: [Task<Void, Never>] = []
    /// When the connections were created (after the DTLS certificate was prepared).
    let startMicros: UInt64
    /// The relay the media goes through, if any (see `init`).
    let relay: UDPRelay?

    /// Two peers, the offerer with `configuration`, the answerer with `answererConfiguration` (or
    /// the same). `alterOffer` may rewrite the offer's SDP on its way. With a `relay`, each peer
    /// is given only one ICE candidate for the other, the relay socket facing it: the real
    /// candidates (and any `a=candidate` lines in the SDP) are not passed on, but the first IPv4
    /// host candidate of each side tells the relay where that side is (the offerer is side `.a`).
    init(offererInput: AudioInput = .testTone(frequency: 440), answererInput: AudioInput = .testTone(frequency: 660),
         offererOutput: AudioOutput? = nil, answererOutput: AudioOutput? = nil,
         configuration: PeerConfiguration = PeerConfiguration(), answererConfiguration: PeerConfiguration? = nil,
         alterOffer: (@Sendable (String) -> String)? = nil, relay: UDPRelay? = nil) throws {
        self.relay = relay
        let beforePrepare = PeerConnection.mediaTimeMicros
        try PeerConnection.prepare()
        startMicros = PeerConnection.mediaTimeMicros
        if startMicros - beforePrepare > 50_000 {
            print("prepare: DTLS certificate generated in \(Double(startMicros - beforePrepare) / 1000) ms")
        }
        loop = GLibLoop(name: "veil-test-call")
        let offererSaw = self.offererSaw, answererSaw = self.answererSaw
        offerer = try PeerConnection(loop: loop, role: .offerer, audioSource: offererInput,
                                     audioOutput: offererOutput ?? .callback { offererSaw.hear($0) },
                                     configuration: configuration)
        answerer = try PeerConnection(loop: loop, role: .answerer, audioSource: answererInput,
                                      audioOutput: answererOutput ?? .callback { answererSaw.hear($0) },
                                      configuration: answererConfiguration ?? configuration)
        for (from, to, recorder, alter, side) in [(offerer, answerer, offererSaw, alterOffer, UDPRelay.Side.a),
                                                  (answerer, offerer, answererSaw, nil, UDPRelay.Side.b)] {
            tasks.append(Task {
                var relayCandidateGiven = false
                for await signal in from.signaling {
                    var signal = signal
                    if case .candidate(let candidate) = signal {
                        recorder.candidates.withLock { $0.append(candidate.candidate) }
                        if let relay {
                            // The real candidate only tells the relay where `from` is; `to` learns of
                            // the relay socket facing it, once.
                            relay.expect(side, fromCandidate: candidate.candidate)
                            guard !relayCandidateGiven else { continue }
                            relayCandidateGiven = true
                            signal = .candidate(ICECandidate(mline: candidate.mline, candidate: relay.candidate(facing: side.other)))
                        }
                    }
                    if case .description(var description) = signal {
                        recorder.descriptions.withLock { $0.append(description) }
                        if let alter {
                            description.sdp = alter(description.sdp)
                        }
                        if relay != nil {
                            description.sdp = description.sdp.components(separatedBy: "\r\n")
                                .filter { !$0.hasPrefix("a=candidate:") && !$0.hasPrefix("a=end-of-candidates") }
                                .joined(separator: "\r\n")
                        }
                        signal = .description(description)
                    }
                    do { try to.receive(signal) } catch {
                        let peerError = error as? PeerError ?? PeerError(.invalidArgument, "\(error)")
                        (recorder === offererSaw ? answererSaw : offererSaw).rejected.withLock { $0.append(peerError) }
                    }
                }
                recorder.streamsEnded.withLock { $0 += 1 }
            })
            tasks.append(Task {
                for await event in from.events { recorder.events.withLock { $0.append(event) } }
                recorder.streamsEnded.withLock { $0 += 1 }
            })
            tasks.append(Task {
                for await frame in from.expressionFrames { recorder.frames.withLock { $0.append(frame) } }
                recorder.streamsEnded.withLock { $0 += 1 }
            })
        }
    }

    /// Waits until both sides are connected and both ends of the data channel are open.
    func waitUntilConnected() async throws {
        do {
            try await eventually("both peers connected with the data channel open") {
                offerer.state == .connected && answerer.state == .connected && offerer.isDataChannelOpen && answerer.isDataChannelOpen
            }
        } catch {
            throw DeadlineExceeded(description: "\(error); \(diagnostics)")
        }
    }

    /// What each side did so far, for failure messages.
    var diagnostics: String {
        [("offerer", offerer, offererSaw), ("answerer", answerer, answererSaw)].map { name, peer, saw in
            "\(name): state \(peer.state), channel open \(peer.isDataChannelOpen), descriptions \(saw.descriptions.withLock { $0.map(\.type) }), events \(saw.events.withLock { $0 })"
        }.joined(separator: "; ")
    }

    /// The privacy invariants on what both sides produced: every description is audio plus the
    /// data channel, never video; every payload received was a valid frame of at most 128 bytes.
    func assertPrivacyInvariants(file: StaticString = #filePath, line: UInt = #line) async {
        let descriptions = offererSaw.descriptions.withLock { $0 } + answererSaw.descriptions.withLock { $0 }
        XCTAssertFalse(descriptions.isEmpty, file: file, line: line)
        for description in descriptions {
            XCTAssertFalse(description.sdp.contains("m=video"), file: file, line: line)
            XCTAssertEqual(SessionDescriptionPolicy.mediaKinds(in: description.sdp), ["audio", "application"], file: file, line: line)
        }
        for peer in [offerer, answerer] {
            let stats = await peer.statistics()
            XCTAssertLessThanOrEqual(stats.expression.largestPayloadReceived, ExpressionFrame.maximumEncodedSize, file: file, line: line)
        }
    }

    /// Closes both connections (each within the deadline) and ends the relays.
    func close() async throws {
        let offerer = self.offerer, answerer = self.answerer
        try await withDeadline("closing both peers") {
            await offerer.close()
            await answerer.close()
        }
        for task in tasks { task.cancel() }
        // The loop stops when the last reference goes (GLibLoop.deinit); stopping it here as well
        // would make that deinit wait 5 s for a thread that has already ended.
    }
}

/// A deterministic varied expression for frame `index`.
func testExpression(_ index: Int) -> VeilCore.Expression {
    var expression = VeilCore.Expression(headPose: HeadPose(yaw: Float(index % 30) - 15, pitch: Float(index % 7), roll: -Float(index % 5)),
                                gaze: Gaze(x: Float(index % 10) / 10, y: -0.25))
    expression[.jawOpen] = Float(index % 20) / 20
    expression[.eyeBlinkLeft] = index % 9 == 0 ? 1 : 0.1
    expression[.mouthSmileRight] = 0.33
    return expression
}

/// Roughly the dominant frequency of a sine, from its zero crossings.
func zeroCrossingFrequency(_ samples: [Float], sampleRate: Double = 48_000) -> Double {
    guard samples.count > 1 else { return 0 }
    var crossings = 0
    for index in 1..<samples.count where (samples[index - 1] < 0) != (samples[index] < 0) { crossings += 1 }
    return Double(crossings) / 2 / (Double(samples.count) / sampleRate)
}

func rms(_ samples: [Float]) -> Float {
    guard !samples.isEmpty else { return 0 }
    return (samples.reduce(0) { $0 + $1 * $1 } / Float(samples.count)).squareRoot()
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
}

/// A sender's camera for tests: every 1/30 s, on a thread of its own, sends
/// `expression(captureTime)` from `peer`, stamped with that capture time (nil sends nothing yet).
final class TestCamera: Sendable {
    private let running = Mutex(true)
    private let sent = Mutex(0)

    init(_ peer: PeerConnection, _ expression: @escaping @Sendable (UInt64) -> VeilCore.Expression?) {
        Thread { [self] in
            var sequence: UInt32 = 0
            while running.withLock({ $0 }) {
                let now = peer.mediaTimeMicros
                if let expression = expression(now) {
                    peer.send(ExpressionFrame(sequence: sequence, captureTimeMicros: now, state: .tracked, expression: expression))
                    sequence &+= 1
                    sent.withLock { $0 += 1 }
                }
                Thread.sleep(forTimeInterval: 1.0 / 30)
            }
        }.start()
    }

    /// Frames sent so far.
    var framesSent: Int { sent.withLock { $0 } }

    func stop() { running.withLock { $0 = false } }
}

/// A receiver's screen for tests, drawing the remote avatar as `CallSession.playout(for:at:)`
/// does: the frames `saw` collected (after the first `skipping`) go into an
/// `ExpressionJitterBuffer`, and `picturesPerSecond` times a second, once `peer` knows the remote
/// voice's playout mapping, the picture for the moment being heard is kept.
final class TestScreen: Sendable {
    /// One picture drawn.
    struct Picture: Sendable {
        var localMicros: UInt64
        var playout: ExpressionJitterBuffer.Playout
        var bufferedFrames: Int
    }

    private let running = Mutex(true)
    private let drawn = Mutex<[Picture]>([])
    private let finalStatistics = Mutex<ExpressionJitterBuffer.Statistics?>(nil)

    init(_ peer: PeerConnection, frames saw: PeerRecorder, skipping: Int = 0, picturesPerSecond: Double) {
        Thread { [self] in
            var buffer = ExpressionJitterBuffer()
            var taken = skipping
            while running.withLock({ $0 }) {
                let arrived = saw.frames.withLock { frames -> ArraySlice<ReceivedExpressionFrame> in
                    defer { taken = frames.count }
                    return frames[min(taken, frames.count)...]
                }
                for received in arrived { buffer.insert(received.frame, arrivalTimeMicros: received.arrivalMediaTimeMicros) }
                let now = peer.mediaTimeMicros
                if let mapping = peer.playoutMapping {
                    let playout = buffer.expression(atPlayoutOf: mapping.senderMediaTimeMicros(playingAt: now))
                    let picture = Picture(localMicros: now, playout: playout, bufferedFrames: buffer.statistics.bufferedFrames)
                    drawn.withLock { $0.append(picture) }
                }
                Thread.sleep(forTimeInterval: 1 / picturesPerSecond)
            }
            finalStatistics.withLock { $0 = buffer.statistics }
        }.start()
    }

    /// The pictures drawn so far.
    var pictures: [Picture] { drawn.withLock { $0 } }

    /// The jitter buffer's statistics when the screen stopped (nil until its thread has ended).
    var statistics: ExpressionJitterBuffer.Statistics? { finalStatistics.withLock { $0 } }

    func stop() { running.withLock { $0 = false } }
}
