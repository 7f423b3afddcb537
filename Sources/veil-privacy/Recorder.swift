import Foundation
import Synchronization
import VeilCore
import VeilMedia
import VeilSynth
import VeilTracking
import VeilVision

/// Records the experiment's sessions: each person's face framed at a size of its own, animated by
/// a fresh performance per session, tracked and estimated as `veil call` does, and written as what
/// each stream would send.
///
/// Per session, in `directory`:
///   <label>.<n>.truth.f32      per frame: the script's actions (`Recorder.truthColumns`)
///   <label>.<n>.estimate.f32   per frame: the estimator's output as computed, before any privacy
///                              level or the wire (what `--refilter` starts from)
///   <label>.<n>.<level>.f32    per frame, for every `PrivacyLevel`: what that level sends
///                              (`Streams`), decoded from the wire bytes
///   <label>.<n>.landmarks.f32  per second: the tracker's 468 points, centred, unit RMS radius, averaged
///   <label>.png                the person as the camera frames them in their first session
/// A frame's row in the stream files is 52 coefficients, yaw, pitch, roll, gaze x, gaze y and 1
/// (NaN and 0 when no face was tracked: a lost frame), little-endian float32. `index.jsonl` has a
/// line per session, `columns.json` the columns' names and the streams.
struct Recorder {
    var people: [Person]
    var directory: URL
    var sessions = 4
    var seconds = 60.0
    var warmUpSeconds = 5.0
    var seed: UInt64 = 19
    var workers = 2
    var quiet = false
    /// Track with the 468-point mesh and the iris model instead of the default attention mesh
    /// (`MediaPipeFaceTracker.Options.attentionMesh`).
    var twoModels = false

    static let streamWidth = BlendShape.allCases.count + 6
    /// The script's actions, in the order of a truth row.
    static let truthColumns: [FacialAction] = [.jawDrop, .blinkLeft, .blinkRight, .smile, .browRaise, .headYaw,
                                               .frown, .pucker, .headPitch, .gazeYaw, .gazePitch]
    static let meshPoints = 468

    struct Job { var person: Int; var session: Int }
    struct Session: Codable {
        var person: String, role: String, session: Int, seed: UInt64, faceWidth: Float
        var frames: Int, framesPerSecond: Double, warmUpSeconds: Double, tracked: Double
    }

    func run() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let jobs = people.indices.flatMap { p in (0..<sessions).map { Job(person: p, session: $0) } }
        let next = Mutex(0), done = Mutex<[Int: Session]>([:]), failure = Mutex<String?>(nil)
        let started = Date()
        let topology = try VeilResources.meshTopology()
        let photos = try people.map { try ImageIO.load($0.photo) }
        DispatchQueue.concurrentPerform(iterations: max(1, workers)) { _ in
            // The faces are framed and animated around the 468-point mesh whichever pipeline
            // tracks them, so that every pipeline is shown the same videos.
            let tracker: MediaPipeFaceTracker, synthesis: MediaPipeFaceTracker
            do {
                tracker = try MediaPipeFaceTracker(options: twoModels ? .meshAndIris : MediaPipeFaceTracker.Options())
                synthesis = try MediaPipeFaceTracker(options: .meshAndIris)
            } catch {
                failure.withLock { $0 = $0 ?? "the face tracker could not start: \(error)" }
                return
            }
            while failure.withLock({ $0 == nil }) {
                let index = next.withLock { n -> Int in defer { n += 1 }; return n }
                guard index < jobs.count else { return }
                do {
                    let session = try record(jobs[index], photo: photos[jobs[index].person], tracker: tracker, synthesis: synthesis,
                                             topology: topology)
                    let count = done.withLock { d -> Int in d[index] = session; return d.count }
                    if !quiet {
                        let elapsed = Date().timeIntervalSince(started)
                        let left = elapsed / Double(count) * Double(jobs.count - count)
                        FileHandle.standardError.write(Data(String(format: "recorded %d/%d sessions (%@ %d, face %.0f px, %.0f %% tracked); about %.0f min left\n",
                                                                   count, jobs.count, session.person, session.session, session.faceWidth,
                                                                   session.tracked * 100, left / 60).utf8))
                    }
                } catch {
                    failure.withLock { $0 = $0 ?? "\(people[jobs[index].person].label): \(error)" }
                }
            }
        }
        if let failure = failure.withLock({ $0 }) { throw VeilError.io(failure) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let lines = try done.withLock { $0 }.sorted { $0.key < $1.key }.map { String(decoding: try encoder.encode($0.value), as: UTF8.self) }
        try (lines.joined(separator: "\n") + "\n").write(to: directory.appendingPathComponent("index.jsonl"), atomically: true, encoding: .utf8)
        try Self.writeColumns(to: directory)
    }

    /// `columns.json`: the columns of stream and truth rows, and the streams written (the default
    /// level first).
    static func writeColumns(to directory: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let columns: [String: [String]] = [
            "stream": BlendShape.allCases.map(\.name) + ["yaw", "pitch", "roll", "gazeX", "gazeY", "tracked"],
            "truth": truthColumns.map(\.rawValue),
            "streams": Streams.names,
        ]
        try encoder.encode(columns).write(to: directory.appendingPathComponent("columns.json"), options: .atomic)
    }

    /// A label's seed: the same person gets the same face size in every run.
    static func hash(_ text: String) -> UInt64 {
        text.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }
    }

    /// Records one session: `synthesis` frames the face and gives the mesh it is animated around,
    /// `tracker` tracks the video.
    func record(_ job: Job, photo: RGBImage, tracker: MediaPipeFaceTracker, synthesis: MediaPipeFaceTracker,
                topology: MeshTopology) throws -> Session {
        let person = people[job.person]
        var rng = SplitMix64(seed: Self.hash(person.label) ^ seed)
        // Each person sits at a distance of their own (a face 60–200 px wide, log-uniform), a little
        // nearer or farther in every session (±15 %).
        let base = exp(Float.random(in: log(60)...log(200), using: &rng))
        for _ in 0..<job.session { _ = rng.next() }
        let width = base * Float.random(in: 0.85...1.15, using: &rng)
        guard let box = try Framing.faceBox(in: photo, box: person.box, tracker: synthesis) else {
            throw VeilError.invalidInput("no face found in \(person.photo.lastPathComponent)")
        }
        let still = Framing.frame(photo, box: box, width: width)
        guard let mesh = try synthesis.landmarks(inStill: still)?.mesh else {
            throw VeilError.invalidInput("the tracker finds no face in \(person.photo.lastPathComponent) at \(Int(width)) px")
        }
        // What the camera saw, to look at: the first session's framing of each person.
        if job.session == 0 { try ImageIO.savePNG(still, to: directory.appendingPathComponent("\(person.label).png")) }
        let synth = try TalkingFaceSynthesizer(photo: still, mesh: mesh, topology: topology)
        let sessionSeed = seed &* 1_000_003 &+ Self.hash(person.label) &+ UInt64(job.session) &* 7919
        let script = try Performance.script(seed: sessionSeed, seconds: warmUpSeconds + seconds)
        tracker.reset()
        let capture = ExpressionCapture(tracker: tracker, privacy: .off)
        var image = RGBImage(width: Framing.size.width, height: Framing.size.height)
        var truth: [Float] = [], estimate: [Float] = [], landmarks: [Float] = []
        var secondSum = [Float](repeating: 0, count: Self.meshPoints * 2), secondCount = 0, tracked = 0
        let frames = script.groundTruth
        for (n, state) in frames.enumerated() {
            synth.frame(at: state.state, into: &image)
            let out = try capture.process(image, captureTimeMicros: UInt64((state.timeSeconds * 1e6).rounded()))
            truth += Self.truthColumns.map { Float(state.state[$0]) }
            estimate += Self.row(out.frame)
            if out.frame.state == .tracked { tracked += 1 }
            if let all = out.tracking.landmarks?.mesh, all.count >= Self.meshPoints {
                let points = all.prefix(Self.meshPoints)
                let centre = points.reduce(SIMD2<Float>(0, 0)) { $0 + SIMD2($1.x, $1.y) } / Float(points.count)
                let radius = (points.reduce(Float(0)) { sum, p in
                    let d = SIMD2(p.x, p.y) - centre
                    return sum + d.x * d.x + d.y * d.y
                } / Float(points.count)).squareRoot()
                for (k, p) in points.enumerated() {
                    secondSum[2 * k] += (p.x - centre.x) / max(radius, 1e-6)
                    secondSum[2 * k + 1] += (p.y - centre.y) / max(radius, 1e-6)
                }
                secondCount += 1
            }
            if (n + 1) % Int(Performance.framesPerSecond) == 0 {
                landmarks += secondCount == 0 ? [Float](repeating: .nan, count: secondSum.count) : secondSum.map { $0 / Float(secondCount) }
                secondSum = [Float](repeating: 0, count: secondSum.count)
                secondCount = 0
            }
        }
        let stem = "\(person.label).\(job.session)"
        for (name, values) in [("truth", truth), ("estimate", estimate), ("landmarks", landmarks)] {
            try Self.write(values, to: directory.appendingPathComponent("\(stem).\(name).f32"))
        }
        try Streams.write(stem: stem, in: directory, estimate: estimate, truth: truth, framesPerSecond: Performance.framesPerSecond)
        return Session(person: person.label, role: person.role.rawValue, session: job.session, seed: sessionSeed, faceWidth: width,
                       frames: frames.count, framesPerSecond: Performance.framesPerSecond, warmUpSeconds: warmUpSeconds,
                       tracked: Double(tracked) / Double(max(frames.count, 1)))
    }

    static func write(_ values: [Float], to url: URL) throws {
        try values.withUnsafeBufferPointer { Data(buffer: $0) }.write(to: url, options: .atomic)
    }

    /// A frame as one row of a stream file.
    static func row(_ frame: ExpressionFrame) -> [Float] {
        guard frame.state == .tracked else { return [Float](repeating: .nan, count: streamWidth - 1) + [0] }
        let e = frame.expression
        return e.coefficients + [e.headPose.yaw, e.headPose.pitch, e.headPose.roll, e.gaze?.x ?? 0, e.gaze?.y ?? 0, 1]
    }
}
