import Foundation
import VeilCore

// veil-privacy: records the sessions of the re-identification experiment (`make privacy`, which
// then runs privacy/attack.py on them). Measuring equipment, not part of Veil.

let usage = """
USAGE: veil-privacy --out DIR [options]

Records every person talking for SECONDS after a warm-up, in SESSIONS sessions each, tracked and
estimated as `veil call` does, and writes what each stream would send (docs/privacy.md).

OPTIONS:
  --out DIR          Where the sessions go (index.jsonl and one set of .f32 files per session)
  --lock FILE        The pinned people (default privacy/photos.lock), with --photos-cache their photos
  --photos-cache DIR Where privacy/setup put the pinned photos (default .cache/veil/privacy/photos)
  --photos DIR       Instead: every image in DIR is one person (its largest face), all held out
  --sessions N       Sessions per person (default 4)
  --seconds S        Seconds per session after the warm-up (default 60)
  --warm-up S        Seconds of talking first, while the estimator calibrates (default 5)
  --people A,B,…     Only these people (labels from the lock file or file names)
  --seed N           Draws the performances and face sizes (default 19)
  --threads N        Sessions recorded at once (default: the number of cores)
  --two-models       Track with the 468-point mesh and the iris model on each eye instead of the
                     default attention mesh (the faces are animated the same either way)
  --refilter         Instead of recording: make every stream of the recording in --out again
                     from its estimator output (after a privacy level changed)
  --quiet            No progress
"""

func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("veil-privacy: \(message)\n".utf8))
    exit(code)
}

var options: [String: String] = [:]
var flags = Set<String>()
var arguments = Array(CommandLine.arguments.dropFirst())
while let argument = arguments.first {
    arguments.removeFirst()
    switch argument {
    case "-h", "--help":
        print(usage)
        exit(0)
    case "--quiet", "--refilter", "--two-models":
        flags.insert(String(argument.dropFirst(2)))
    case "--out", "--lock", "--photos-cache", "--photos", "--sessions", "--seconds", "--warm-up", "--people", "--seed", "--threads":
        guard let value = arguments.first else { fail("\(argument) needs a value\n\n\(usage)", code: 2) }
        arguments.removeFirst()
        options[String(argument.dropFirst(2))] = value
    default:
        fail("unknown argument \(argument)\n\n\(usage)", code: 2)
    }
}
guard let out = options["out"] else { fail("--out DIR is required\n\n\(usage)", code: 2) }
func number<T: LosslessStringConvertible & Comparable>(_ key: String, _ fallback: T, _ range: ClosedRange<T>) -> T {
    guard let text = options[key] else { return fallback }
    guard let value = T(text), range.contains(value) else { fail("--\(key) must be a number in \(range.lowerBound)…\(range.upperBound)", code: 2) }
    return value
}

do {
    if flags.contains("refilter") {
        try Streams.refilter(URL(fileURLWithPath: out), quiet: flags.contains("quiet"))
        exit(0)
    }
    let root = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    var people: [Person]
    if let folder = options["photos"] {
        people = try People.folder(URL(fileURLWithPath: folder))
    } else {
        let lock = URL(fileURLWithPath: options["lock"] ?? "privacy/photos.lock", relativeTo: root)
        let cache = options["photos-cache"].map { URL(fileURLWithPath: $0) }
            ?? (VeilResources.cacheDirectory ?? root.appendingPathComponent(".cache/veil")).appendingPathComponent("privacy/photos")
        people = try People.pinned(lock: lock, photos: cache)
    }
    if let only = options["people"] {
        let wanted = Set(only.split(separator: ",").map(String.init))
        let unknown = wanted.subtracting(people.map(\.label))
        guard unknown.isEmpty else { fail("no such people: \(unknown.sorted().joined(separator: ", "))", code: 2) }
        people = people.filter { wanted.contains($0.label) }
    }
    var recorder = Recorder(people: people, directory: URL(fileURLWithPath: out))
    recorder.sessions = number("sessions", 4, 2...100)
    recorder.seconds = number("seconds", 60.0, 5...3600)
    recorder.warmUpSeconds = number("warm-up", 5.0, 0...60)
    recorder.seed = number("seed", UInt64(19), 0...UInt64.max)
    recorder.workers = number("threads", ProcessInfo.processInfo.activeProcessorCount, 1...256)
    recorder.quiet = flags.contains("quiet")
    recorder.twoModels = flags.contains("two-models")
    if !recorder.quiet {
        FileHandle.standardError.write(Data("recording \(people.count) people × \(recorder.sessions) sessions of \(Int(recorder.warmUpSeconds)) + \(Int(recorder.seconds)) s on \(recorder.workers) thread(s)\n".utf8))
    }
    try recorder.run()
} catch {
    fail("\(error)")
}
