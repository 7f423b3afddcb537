import Foundation
import XCTest

/// Veil's package graph as SwiftPM reads Package.swift: target name → the names of the targets and
/// products it depends on. The tests that keep layers apart (the call layer reaches no picture, the
/// room server links no media code) ask it who can reach what.
public struct PackageGraph {
    /// The package root, from this file's place in it.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Target name → direct dependencies.
    public let dependencies: [String: [String]]

    /// A graph given as data.
    public init(_ dependencies: [String: [String]]) { self.dependencies = dependencies }

    /// Reads the package's graph with `swift package dump-package`, with a scratch directory of its
    /// own so that it does not wait for the build the tests run in. Skips the test without a
    /// `swift` executable.
    public static func read() throws -> PackageGraph {
        let swift = ProcessInfo.processInfo.environment["SWIFT"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ["/opt/swift/usr/bin/swift", "/usr/bin/swift", "/usr/local/bin/swift"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let swift else { throw XCTSkip("no swift executable to read the package graph with") }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("veil-graph-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: swift)
        process.arguments = ["package", "--package-path", root.path, "--scratch-path", scratch.path, "dump-package"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "swift package dump-package failed")
        let manifest = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        var graph: [String: [String]] = [:]
        for target in try XCTUnwrap(manifest["targets"] as? [[String: Any]]) {
            let name = try XCTUnwrap(target["name"] as? String)
            graph[name] = (target["dependencies"] as? [[String: Any]] ?? []).compactMap { dependency in
                // {"byName": [name, condition]}, {"target": [name, condition]}, {"product": [name, package, …]}
                dependency.values.compactMap { ($0 as? [Any])?.first as? String }.first
            }
        }
        return PackageGraph(graph)
    }

    /// The direct dependencies of `target`, nil when there is no such target.
    public subscript(target: String) -> [String]? { dependencies[target] }

    /// Every target `start` depends on, directly or not.
    public func closure(of start: String) -> Set<String> {
        var seen = Set<String>(), stack = dependencies[start] ?? []
        while let next = stack.popLast() {
            if seen.insert(next).inserted { stack += dependencies[next] ?? [] }
        }
        return seen
    }

    /// `target` and every target that depends on it, directly or not.
    public func dependents(of target: String) -> Set<String> {
        Set(dependencies.keys.filter { $0 == target || closure(of: $0).contains(target) })
    }
}
