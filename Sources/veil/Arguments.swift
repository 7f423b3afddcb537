import Foundation
import VeilCore

/// A usage error: printed with the command's help hint, exit status 2.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Minimal GNU-style argument parsing: positional arguments, `--name value`, `--name=value`,
/// `-o value`, and boolean flags. A valued option given more than once keeps every value
/// (`values`); `value` is the last.
struct Arguments {
    private(set) var positionals: [String] = []
    private var options: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// - Parameters:
    ///   - valued: option names (without dashes) that take a value; short aliases map to them.
    ///   - booleans: flag names that take none.
    init(_ args: [String], valued: Set<String>, booleans: Set<String>, aliases: [String: String] = [:]) throws {
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let arg = args[i]
            i += 1
            if onlyPositionals || !arg.hasPrefix("-") || arg == "-" {
                positionals.append(arg); continue
            }
            if arg == "--" { onlyPositionals = true; continue }
            var name = arg.hasPrefix("--") ? String(arg.dropFirst(2)) : String(arg.dropFirst())
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...]); name = String(name[..<eq])
            }
            name = aliases[name] ?? name
            if booleans.contains(name) {
                guard inline == nil else { throw UsageError("--\(name) takes no value") }
                flags.insert(name)
            } else if valued.contains(name) {
                if let inline { options[name, default: []].append(inline); continue }
                guard i < args.count else { throw UsageError("--\(name) needs a value") }
                options[name, default: []].append(args[i]); i += 1
            } else {
                throw UsageError("unknown option \(arg)")
            }
        }
    }

    func value(_ name: String) -> String? { options[name]?.last }
    /// Every value of a repeatable option, in the order given.
    func values(_ name: String) -> [String] { options[name] ?? [] }
    func flag(_ name: String) -> Bool { flags.contains(name) }

    func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text = value(name) else { return fallback }
        guard let v = Int(text), range.contains(v) else {
            throw UsageError("--\(name) must be a whole number in \(range.lowerBound)…\(range.upperBound), not \(text)")
        }
        return v
    }

    /// `WIDTHxHEIGHT`, e.g. 640x480.
    func size(_ name: String, default fallback: (Int, Int)) throws -> (width: Int, height: Int) {
        guard let text = value(name) else { return fallback }
        let parts = text.lowercased().split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, (16...4096).contains(parts[0]), (16...4096).contains(parts[1]),
              parts[0] % 2 == 0, parts[1] % 2 == 0 else {
            throw UsageError("--\(name) must be WIDTHxHEIGHT with even sides of 16…4096 pixels, e.g. 640x480; not \(text)")
        }
        return (parts[0], parts[1])
    }

    /// `--privacy strict|standard|off` (`--full-expression` is `off`); `PrivacyLevel.default` when
    /// neither is given.
    func privacyLevel() throws -> PrivacyLevel {
        let named = try value("privacy").map { text -> PrivacyLevel in
            guard let level = PrivacyLevel(name: text) else {
                throw UsageError("--privacy must be \(PrivacyLevel.allCases.map(\.rawValue).joined(separator: ", ")), not \(text)")
            }
            return level
        }
        if flag("full-expression") {
            guard named == nil || named == .off else { throw UsageError("--full-expression is --privacy off; give one of them") }
            return .off
        }
        return named ?? .default
    }

    /// The help text of `--privacy`, for every command that takes it.
    static let privacyHelp = """
      --privacy strict|standard|off   How much of your face's own way of moving your expressions
                               carry (docs/privacy.md). strict (the default): the mouth follows
                               your voice; smiles, frowns, brow raises, puckers, nods and turns are
                               sent as events of one strength; the avatar blinks on its own; no
                               gaze. standard: each channel in your own range, with its strength
                               and timing, your blinks, and looks away past a dead zone. off (or
                               --full-expression): every coefficient the estimator reads, as read:
                               winks, one-sided and subtler expressions, and your face's signature
    """
}
