import Foundation

/// espeak-ng's voice for `text` as a WAV file at `path` (returned), or nil when espeak-ng is
/// missing: a voice for demonstrations and measurements.
public func speak(_ text: String, voice: String, to path: String) throws -> String? {
    let candidates = ["/usr/bin/espeak-ng", "/usr/local/bin/espeak-ng"]
    guard let tool = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = ["-v", voice, "-s", "150", "-w", path, text]
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus == 0 ? path : nil
}
