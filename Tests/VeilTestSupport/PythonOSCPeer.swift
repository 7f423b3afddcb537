import Foundation
import VeilCore

/// python-osc, the OSC implementation Veil's tests check Veil against: `osc_peer.py`
/// (Tests/VeilInteropTests/python) in its pinned virtual environment under Veil's cache, which
/// that directory's `setup` installs and `make test` runs.
public enum PythonOSCPeer {
    /// Tests/VeilInteropTests/python: `setup` and `osc_peer.py`.
    public static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("VeilInteropTests/python")
    /// The peer's script.
    public static var script: URL { directory.appendingPathComponent("osc_peer.py") }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The virtual environment's interpreter. Fails (rather than skips) when it is missing.
    public static func interpreter() throws -> URL {
        let setup = directory.appendingPathComponent("setup").path
        guard let cache = VeilResources.cacheDirectory else {
            throw Failure("Veil's cache (.cache/veil) was not found: run `make test`, or scripts/bootstrap then \(setup)")
        }
        let python = cache.appendingPathComponent("interop/venv/bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw Failure("python-osc's virtual environment is missing (\(python.path)): run \(setup) (`make test` runs it)")
        }
        return python
    }

    /// Runs `osc_peer.py arguments…` (or another `script` of the environment's directory) with
    /// `input` on its standard input; its standard output.
    public static func run(_ arguments: [String], input: Data, script: URL = script) throws -> Data {
        let process = Process()
        process.executableURL = try interpreter()
        process.arguments = [script.path] + arguments
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        let errors = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure("\(script.lastPathComponent) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus): \(String(decoding: errors, as: UTF8.self))")
        }
        return output
    }
}
