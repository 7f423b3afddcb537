import Foundation
import VeilCore
import VeilVision
import XCTest
@testable import VeilMedia

/// The window: refused clearly without a display; under Xvfb (when installed) it opens and shows
/// frames without blocking.
final class VideoDisplayTests: XCTestCase {
    func testNoDisplayIsAClearError() throws {
        for environment in [[:], ["DISPLAY": "", "WAYLAND_DISPLAY": ""], ["HOME": "/root"]] {
            let error = assertMediaError(.displayUnavailable) {
                try VideoDisplay(title: "Veil", width: 640, height: 480, environment: environment)
            }
            XCTAssertTrue(error?.message.hasPrefix("no display: use --out FILE.mp4") ?? false, error?.message ?? "")
        }
        let environment = ProcessInfo.processInfo.environment
        if (environment["DISPLAY"] ?? "").isEmpty && (environment["WAYLAND_DISPLAY"] ?? "").isEmpty {
            assertMediaError(.displayUnavailable) { try VideoDisplay(title: "Veil", width: 640, height: 480) }
        }
        assertMediaError(.invalidArgument) { try VideoDisplay(title: "Veil", width: 0, height: 480, environment: ["DISPLAY": ":0"]) }
    }

    func testUnreachableDisplayIsAClearError() throws {
        try withEnvironment(["DISPLAY": ":4321", "WAYLAND_DISPLAY": nil]) {
            let error = assertMediaError(.displayUnavailable) {
                try VideoDisplay(title: "Veil", width: 64, height: 48)
            }
            XCTAssertTrue(error?.message.contains(":4321") ?? false, error?.message ?? "")
        }
    }

    func testWindowUnderXvfb() throws {
        let xvfb = try XCTUnwrap(["/usr/bin/Xvfb", "/usr/local/bin/Xvfb"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }),
                                 "Xvfb is not installed (scripts/bootstrap installs xvfb): the window test needs a virtual X display")
        guard let server = try runWithDeadline(10, { try VirtualDisplay(xvfb) }) else { return }
        defer { server.stop() }
        try withEnvironment(["DISPLAY": server.name, "WAYLAND_DISPLAY": nil]) {
            guard let display = try runWithDeadline(10, { try VideoDisplay(title: "Veil test window", width: 320, height: 240) }) else { return }
            // Close the window before the X server goes: Xlib ends the process when its server dies.
            defer { display.close() }
            XCTAssertTrue(display.isOpen)
            let started = Date()
            try runWithDeadline {
                for i in 0..<120 {
                    try display.show(MovingSquare.image(frame: i % 90, width: 320, height: 240))
                }
            }
            XCTAssertLessThan(Date().timeIntervalSince(started), 5, "show must not wait for the screen")
            print("showed 120 frames in \(Date().timeIntervalSince(started)) s on \(server.name) with \(display.sinkName)")
            XCTAssertTrue(display.isOpen)
            assertMediaError(.invalidArgument) { try display.show(RGBImage(width: 10, height: 10)) }
            // The window exists on the X server.
            do { // xwininfo: x11-utils, which scripts/bootstrap installs
                let tree = try runWithDeadline { try runProgram("/usr/bin/xwininfo", ["-root", "-tree"], environment: ["DISPLAY": server.name]) } ?? ""
                print(tree.split(separator: "\n").filter { $0.contains("(") && !$0.contains("has no name") }.joined(separator: "\n"))
                XCTAssertTrue(tree.contains("320x240"), "no 320×240 window in:\n\(tree)")
                if display.sinkName != "glimagesink" {
                    XCTAssertTrue(tree.contains("\"Veil test window"), "the window has its title (X sinks append the program name):\n\(tree)")
                }
            }
            // The compact mode: half size, and asked to stay above other windows (EWMH; Xvfb runs no
            // window manager, so the request shows as the window's _NET_WM_STATE property).
            XCTAssertTrue(try display.setCompact(true), "\(display.sinkName): Veil's own X window can be kept on top")
            XCTAssertTrue(display.isCompact)
            try runWithDeadline { for i in 0..<30 { try display.show(MovingSquare.image(frame: i, width: 320, height: 240)) } }
            let compact = try windowState(title: "Veil test window", on: server.name)
            print("compact: \(compact.geometry), \(compact.state)")
            XCTAssertEqual(compact.geometry, "160x120")
            XCTAssertTrue(compact.state.contains("_NET_WM_STATE_ABOVE"), compact.state)
            XCTAssertTrue(try display.setCompact(false))
            try runWithDeadline { for i in 0..<30 { try display.show(MovingSquare.image(frame: i, width: 320, height: 240)) } }
            let full = try windowState(title: "Veil test window", on: server.name)
            XCTAssertEqual(full.geometry, "320x240")
            XCTAssertFalse(full.state.contains("_NET_WM_STATE_ABOVE"), full.state)
            XCTAssertTrue(display.isOpen)
            display.close()
            XCTAssertFalse(display.isOpen)
            assertMediaError(.invalidState) { try display.setCompact(true) }
            display.close()
            assertMediaError(.invalidState) { try display.show(MovingSquare.image(frame: 0, width: 320, height: 240)) }
        }
    }

    /// The size (xwininfo) and the _NET_WM_STATE property (xprop) of the window titled `title`.
    private func windowState(title: String, on display: String) throws -> (geometry: String, state: String) {
        let environment = ["DISPLAY": display]
        let tree = try runProgram("/usr/bin/xwininfo", ["-root", "-tree"], environment: environment)
        let line = try XCTUnwrap(tree.split(separator: "\n").first { $0.contains("\"\(title)\"") }, "no window \(title) in:\n\(tree)")
        let fields = line.split(separator: " ")
        let id = String(try XCTUnwrap(fields.first))
        let geometry = fields.first { $0.contains("x") && $0.contains("+") }.map { String($0.prefix { $0 != "+" }) } ?? ""
        let state = try runProgram("/usr/bin/xprop", ["-id", id, "_NET_WM_STATE"], environment: environment)
        return (geometry, state.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Sets (or with nil removes) environment variables for the duration of `body`.
    private func withEnvironment(_ values: [String: String?], _ body: () throws -> Void) rethrows {
        let saved = values.keys.map { ($0, ProcessInfo.processInfo.environment[$0]) }
        func apply(_ pairs: [(String, String?)]) {
            for (key, value) in pairs {
                if let value { setenv(key, value, 1) } else { unsetenv(key) }
            }
        }
        apply(values.map { ($0.key, $0.value) })
        defer { apply(saved) }
        try body()
    }
}

/// An Xvfb server on a free display number, which it reports through `-displayfd` once it accepts
/// connections, so nothing polls.
private final class VirtualDisplay: @unchecked Sendable {
    let process = Process()
    let name: String

    init(_ executable: String) throws {
        let ready = Pipe()
        process.executableURL = URL(fileURLWithPath: executable)
        // -noreset: an X server resets when its last client leaves, and refuses connections while it
        // does. A desktop always has clients (its window manager); here the sink that finds no Xv
        // extension may be the only one, and the next connection would meet the reset.
        process.arguments = ["-displayfd", "1", "-screen", "0", "1024x768x24", "-nolisten", "tcp", "-noreset"]
        process.standardOutput = ready
        process.standardError = FileHandle.nullDevice
        try process.run()
        var number = Data()
        while !number.contains(UInt8(ascii: "\n")) {
            let chunk = ready.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // Xvfb exited
            number.append(chunk)
        }
        let digits = String(decoding: number, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !digits.isEmpty, digits.allSatisfy(\.isNumber) else {
            process.terminate()
            throw MediaError(.displayUnavailable, "Xvfb did not start (it reported '\(digits)')")
        }
        name = ":\(digits)"
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// Runs a program and returns its standard output.
private func runProgram(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> String {
    let process = Process()
    let output = Pipe()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = environment
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
