import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Output helpers: messages on stderr, a progress bar with ETA when stderr is a terminal.
public enum Terminal {
    public static let isInteractive = isatty(STDERR_FILENO) != 0

    public static func error(_ message: String) {
        FileHandle.standardError.write(Data("veil: error: \(message)\n".utf8))
    }

    public static func note(_ message: String) {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
    }
}

/// A one-line progress bar (`[#####-----] 42/100 frames  12.3 fps  ETA 0:05`), redrawn at most
/// ten times a second on a terminal; plain percentage lines every 25 % otherwise.
public final class ProgressBar {
    private let total: Int?
    private let label: String
    private let start = Date()
    private var lastDraw = Date.distantPast
    private var lastQuarter = -1
    private let quiet: Bool

    public init(total: Int?, label: String, quiet: Bool = false) {
        self.total = total.flatMap { $0 > 0 ? $0 : nil }
        self.label = label
        self.quiet = quiet
    }

    public func update(_ done: Int) {
        guard !quiet else { return }
        let elapsed = Date().timeIntervalSince(start)
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        if Terminal.isInteractive {
            guard Date().timeIntervalSince(lastDraw) > 0.1 else { return }
            lastDraw = Date()
            var line = "\r\(label) "
            if let total {
                let fraction = min(Double(done) / Double(total), 1)
                let filled = Int(fraction * 24)
                line += "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: 24 - filled) + "] "
                line += "\(done)/\(total)"
                if rate > 0 { line += "  \(String(format: "%.1f", rate)) fps  ETA \(Self.clock(Double(max(total - done, 0)) / rate))" }
            } else {
                line += "\(done) frames  \(String(format: "%.1f", rate)) fps"
            }
            FileHandle.standardError.write(Data((line + "\u{1B}[K").utf8))
        } else if let total {
            let quarter = min(done * 4 / total, 4)
            if quarter > lastQuarter {
                lastQuarter = quarter
                Terminal.note("\(label): \(quarter * 25)% (\(done)/\(total) frames)")
            }
        }
    }

    public func finish() {
        if !quiet && Terminal.isInteractive { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    public static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return String(format: "%d:%02d", s / 60, s % 60)
    }
}
